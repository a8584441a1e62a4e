"""The part of each admin rule the API server enforces by itself, as ValidatingAdmissionPolicies
and their bindings, so it holds while dra-bridge is down: what needs no inventory and no other
object (per-request and per-claim counts, classes, admin access, legacy asks on pods). Pure.

What needs the inventory or other objects (allocationMode All, per-pod and namespace totals,
required selectors, allowed devices, validations over dra-bridge's view of a request, exclusions
by namespace or object labels) stays the webhook's; `compile_rule` says which, field by field.
One policy per kind it judges (claims, templates, pods), so each is typed against its own schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.common import view_of, vocabulary

from .rules import Rule

PREFIX = "dra-bridge."
# As the webhooks' matchConditions: a pod asks the device plugin for GPUs.
LEGACY_KEYS = "k.startsWith('nvidia.com/') || k.startsWith('volcano.sh/') || k == 'kubernetes.io/gpu' || " \
              "k.startsWith('koordinator.sh/gpu')"
REQUESTS = {"ResourceClaim": ("resourceclaims", "object.spec"), "ResourceClaimTemplate": (
    "resourceclaimtemplates", "object.spec.spec")}
# KEP-5004: every DeviceClass serves this extended resource for its devices.
CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
# What of maxDevicesPerPod stays the webhook's where the pod's own asks are compiled.
POD_COUNT_PART = ("for the claims and templates a pod names, and extended resources a class names by "
                  "extendedResourceName (the API server counts the pod's own device-plugin and "
                  f"{CLASS_RESOURCE_PREFIX}* asks, and the claim the scheduler writes for them)")
WEBHOOK_ONLY = {
    "maxDevicesPerPod": "needs the claims a pod names",
    "maxDevicesPerNamespace": ("needs the namespace's claims; best-effort: claims admitted at the same moment do "
                               "not count each other (exact per class: a ResourceQuota on "
                               "<class>.deviceclass.resource.k8s.io/devices; policy compile --quotas writes it)"),
    "requireSelectors": "needs what each selector reads, and its DeviceClass's selectors",
    "allowedDevices": ("needs the inventory's devices; best-effort: judged against the devices published now, so a "
                       "pool scaled to zero is not seen (exact: a DeviceClass whose selectors allow only those "
                       "devices, named in allowedDeviceClasses)"),
    "validations": "run over dra-bridge's view of a request (the devices it would take)",
}


@dataclass
class Compiled:
    rule: str
    objects: list[dict] = field(default_factory=list)  # policies and bindings (none: nothing compiled)
    compiled: list[str] = field(default_factory=list)  # the rule's fields the API server enforces
    webhook_only: list[tuple[str, str]] = field(default_factory=list)  # (the rule's field, why)


def compile_rule(rule: Rule, weaker: str | None = None, device_keys: str = "") -> Compiled:
    """rule: its validationActions resolved (Policy.compiled_rules); weaker: why the binding's
    actions fall short of the webhook's (None: they do not); device_keys: CEL over `k`, the
    extended resources a pod asks whole devices by (pod_device_keys), for maxDevicesPerPod."""
    out = Compiled(rule.name)
    ex = rule.exclude
    by_selector = ex is not None and (ex.namespaceSelector is not None or ex.objectSelector is not None)
    kinds = set(rule.match.kinds or ("Pod", *REQUESTS)) - set(ex.kinds if ex is not None else ())
    pod_count = bool(rule.maxDevicesPerPod and device_keys and "Pod" in kinds and not by_selector)
    reasons = {**WEBHOOK_ONLY, **({"maxDevicesPerPod": POD_COUNT_PART} if pod_count else {})}
    out.webhook_only = [(name, why) for name, why in reasons.items() if getattr(rule, name)]
    if weaker:
        out.webhook_only.append(("validationActions", weaker))
    if by_selector:
        out.webhook_only.insert(0, ("exclude.namespaceSelector/objectSelector", "a binding cannot exempt by them"))
        return out
    claim_checks = _claim_checks(rule)
    out.compiled = [name for name, _test, _message in claim_checks]
    # The claim the scheduler writes for a pod's extended resources carries none of the pod's
    # labels: an objectSelector cannot pick it, so then the webhook alone judges it.
    served = pod_count and rule.match.objectSelector is None
    if pod_count and not served:
        out.webhook_only = [(n, f"{why}; and the scheduler's claims for the pods it selects by labels"
                             if n == "maxDevicesPerPod" else why) for n, why in out.webhook_only]
    for kind in sorted(k for k in {*kinds, *(["ResourceClaim"] if served else [])} if k in REQUESTS):
        resource, spec = REQUESTS[kind]
        checks = [(test, message) for _name, test, message in claim_checks] if kind in kinds else []
        if served and kind == "ResourceClaim":
            checks.append(_served_check(rule.name, rule.maxDevicesPerPod or 0))
        if checks:
            variable = f"has({spec}.devices) && has({spec}.devices.requests) ? {spec}.devices.requests : []"
            out.objects += _pair(rule, resource, [{"name": "requests", "expression": variable}],
                                 [{"expression": test, "message": message} for test, message in checks])
    pod_checks, pod_variables = [], []  # one policy for pods: its name is the rule's and the kind's
    if rule.forbidLegacy and "Pod" in kinds:
        # Each list walked alone (`containers + initContainers` does not type-check), and the
        # resource maps read through dyn(): the API server's schema types them so that `limits` is
        # an undefined field to its checker, though evaluation reads it.
        res = "dyn(c.resources)"
        each = (f"c, has(c.resources) && ((has({res}.limits) && {res}.limits.exists(k, {LEGACY_KEYS})) || "
                f"(has({res}.requests) && {res}.requests.exists(k, {LEGACY_KEYS})))")
        asks = (f"(object.spec.containers.exists({each}) || (has(object.spec.initContainers) && "
                f"object.spec.initContainers.exists({each})))")
        pod_checks.append({"expression": f"!{asks}", "message": (
            f"rule {rule.name}: legacy GPU requests are not allowed; ask through a ResourceClaim")})
        out.compiled.append("forbidLegacy")
    if pod_count:
        n = rule.maxDevicesPerPod
        pod_variables.append({"name": "devices", "expression": _pod_devices(device_keys)})
        pod_checks.append({"expression": f"variables.devices <= {n}",
                           "message": f"rule {rule.name}: the pod asks for more than {n} devices"})
        out.compiled.append("maxDevicesPerPod")
    if pod_checks:
        out.objects += _pair(rule, "pods", pod_variables, pod_checks)
    for name in ("maxDevicesPerRequest", "maxDevicesPerClaim"):
        if getattr(rule, name):
            out.webhook_only.append((name, "for allocationMode All requests (the devices they take are the "
                                           "inventory's)"))
    return out


def pod_device_keys(migration) -> str:
    """CEL over `k`: an extended resource each unit of which is one whole device: the policy's
    `count` resources (countAs devices) and every class's own resource. Shares, memory and cores
    are left to the webhook, so the API server never counts more than it does."""
    tests = [f"k.startsWith('{CLASS_RESOURCE_PREFIX}')"]
    for found in migration.resources:
        if found.role != "count" or found.countAs != "devices" or found.shared or not found.deviceClass:
            continue
        tests.append(f"k == {json.dumps(found.name)}" if found.name else f"k.matches({json.dumps('^' + found.pattern + '$')})")
    return " || ".join(tests)


def _pod_devices(keys: str) -> str:
    """Whole devices the pod's containers and init containers ask by extended resources (limits:
    the API server requires them for extended resources). Each list walked alone (see forbidLegacy)."""
    res = "dyn(c.resources)"
    each = (f"c, has(c.resources) && has({res}.limits) ? {res}.limits.filter(k, {keys})"
            f".map(k, quantity(string({res}.limits[k])).asInteger()).sum() : 0")
    return (f"object.spec.containers.map({each}).sum() + (has(object.spec.initContainers) ? "
            f"object.spec.initContainers.map({each}).sum() : 0)")


def _served_check(rule_name: str, n: int) -> tuple[str, str]:
    """The claim the scheduler creates for a pod's extended resources (KEP-5004) holds the pod's
    whole-device asks: a claim of more than maxDevicesPerPod devices serves a pod over it."""
    annotation = json.dumps(vocabulary.EXTENDED_CLAIM_ANNOTATION)
    extended = (f"has(object.metadata.annotations) && {annotation} in object.metadata.annotations && "
                f"object.metadata.annotations[{annotation}] == 'true'")
    return (f"!({extended}) || {_claim_total()} <= {n}",
            f"rule {rule_name}: the scheduler's claim for a pod's extended resources asks for more than {n} devices")


def _claim_total() -> str:
    return (f"variables.requests.map(r, has(r.exactly) ? {_counted('r.exactly')} : (has(r.firstAvailable) ? "
            f"r.firstAvailable.map(s, {_counted('s')}).max() : 0)).sum()")


def _claim_checks(rule: Rule) -> list[tuple[str, str, str]]:
    """(field, CEL over variables.requests, message) for each compilable claim check."""
    found = []
    if rule.maxDevicesPerRequest:
        n = rule.maxDevicesPerRequest
        found.append(("maxDevicesPerRequest", _every_request(lambda a: f"{_counted(a)} <= {n}"),
                      f"rule {rule.name}: a request asks for more than {n} devices"))
    if rule.maxDevicesPerClaim:
        n = rule.maxDevicesPerClaim
        found.append(("maxDevicesPerClaim", f"{_claim_total()} <= {n}",
                      f"rule {rule.name}: the claim asks for more than {n} devices"))
    if rule.allowedDeviceClasses is not None:
        allowed = json.dumps(list(rule.allowedDeviceClasses))
        found.append(("allowedDeviceClasses", _every_request(lambda a: f"{a}.deviceClassName in {allowed}"),
                      f"rule {rule.name}: a DeviceClass that is not allowed (allowed: "
                      f"{', '.join(rule.allowedDeviceClasses) or 'none'})"))
    admin = "variables.requests.exists(r, has(r.exactly) && has(r.exactly.adminAccess) && r.exactly.adminAccess)"
    if rule.allowAdminAccess is False:
        found.append(("allowAdminAccess", f"!{admin}", f"rule {rule.name}: admin access is not allowed here"))
    if rule.adminAccessNamespaces is not None:
        names = json.dumps(list(rule.adminAccessNamespaces))
        # namespaceObject, not request.namespace: `namespace` is a CEL reserved word.
        found.append(("adminAccessNamespaces", f"namespaceObject.metadata.name in {names} || !{admin}",
                      f"rule {rule.name}: admin access is allowed only in the namespaces the policy names "
                      f"({', '.join(rule.adminAccessNamespaces) or 'none'})"))
    return found


def _counted(var: str) -> str:
    """Devices a request or subrequest takes by its count; allocationMode All is the webhook's (0)."""
    return f"(has({var}.allocationMode) && {var}.allocationMode == 'All' ? 0 : (has({var}.count) ? {var}.count : 1))"


def _every_request(test) -> str:
    """`test(var)` holds for every exact request and every firstAvailable subrequest (two walks:
    they are different types to the API server's checker)."""
    return (f"variables.requests.all(r, !has(r.exactly) || {test('r.exactly')}) && "
            f"variables.requests.all(r, !has(r.firstAvailable) || r.firstAvailable.all(s, {test('s')}))")


def _pair(rule: Rule, resource: str, variables: list[dict], validations: list[dict]) -> list[dict]:
    name = f"{PREFIX}{rule.name}.{resource}"
    group = "" if resource == "pods" else "resource.k8s.io"
    spec: dict = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
        # scope: the server's default, written: `policy compile | kubectl apply` again changes nothing
        {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource],
         "scope": "*"}]}}
    conditions = _exclusions(rule)
    if conditions:
        spec["matchConditions"] = conditions
    if variables:
        spec["variables"] = variables
    spec["validations"] = validations
    meta = {"name": name, "labels": dict(vocabulary.MANAGED_BY), "annotations": {
        vocabulary.POLICY_RULE_ANNOTATION: rule.name}}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta,
             "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {**meta, "labels": dict(vocabulary.MANAGED_BY)}, "spec": _binding(rule, name)}]


def _exclusions(rule: Rule) -> list[dict]:
    ex = rule.exclude
    if ex is None:
        return []
    out = []
    users = list(ex.users) + [f"system:serviceaccount:{a.replace('/', ':', 1)}" for a in ex.serviceAccounts]
    if users:
        out.append({"name": "not-an-excluded-user", "expression": f"!(request.userInfo.username in {json.dumps(users)})"})
    if ex.groups:
        groups = json.dumps(list(ex.groups))
        out.append({"name": "not-an-excluded-group",
                    "expression": f"!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {groups}))"})
    return out


def _binding(rule: Rule, name: str) -> dict:
    selector: dict = {}
    if rule.match.namespaces:
        selector["matchExpressions"] = [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                         "values": list(rule.match.namespaces)}]
    if rule.exclude is not None and rule.exclude.namespaces:
        selector.setdefault("matchExpressions", []).append(
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(rule.exclude.namespaces)})
    if rule.match.namespaceSelector is not None:
        given = rule.match.namespaceSelector.model_dump(exclude_none=True, exclude_defaults=True)
        if given.get("matchLabels"):
            selector["matchLabels"] = given["matchLabels"]
        selector["matchExpressions"] = selector.get("matchExpressions", []) + given.get("matchExpressions", [])
    match = {}
    if any(selector.values()):
        match["namespaceSelector"] = {k: v for k, v in selector.items() if v}
    if rule.match.objectSelector is not None:
        match["objectSelector"] = rule.match.objectSelector.model_dump(exclude_none=True, exclude_defaults=True)
    spec: dict = {"policyName": name, "validationActions": list(rule.validationActions or ())}
    if match:
        spec["matchResources"] = match
    return spec


def compile_policy(policy) -> tuple[list[Compiled], list[dict]]:
    """Every rule of a Policy compiled, and all the objects they make."""
    keys = pod_device_keys(policy.migration)
    found = [compile_rule(rule, weaker, keys) for rule, weaker in policy.compiled_rules()]
    return found, [obj for each in found for obj in each.objects]


def vap_changes(desired: list[dict], existing: list[dict]) -> tuple[list[dict], list[tuple[str | None, str]]]:
    """What to write (missing, or not what we would write: someone edited it) and what to delete
    ((kind, name) of ours no rule compiles to any more: bindings before their policies, so none
    dangles). The API server fills defaults in, so what we write need only be found within."""
    # Only names compile_rule makes: the shipped reporter policy, or anyone else's, is never touched.
    have = {(o.get("kind"), name): o for o in existing if (name := view_of(o).name).startswith(PREFIX)}
    write = [o for o in desired if not _within(o["spec"], (have.get((o["kind"], o["metadata"]["name"])) or {}).get("spec"))]
    wanted = {(o["kind"], o["metadata"]["name"]) for o in desired}
    delete = sorted((k for k in have if k not in wanted), key=lambda k: (k[0] != "ValidatingAdmissionPolicyBinding", k))
    return write, delete


def _within(want, have) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _within(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_within, want, have))
    return want == have
