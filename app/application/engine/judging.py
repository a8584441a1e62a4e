"""Admin rules judged on what an object would get: its requests, the devices each would take
(allocationMode All: every device it matches on the node with most), per claim and per pod,
whichever path the pod takes. Pure: the caller says who asks and what the inventory holds."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from app import cel
from app.common import held_devices, view_of
from app.dra import ClaimError, ClaimSpec, Index, Request, candidates, parse_claim_object
from app.policy import REQUEST_VARIABLES, Rule

MAX_DEVICE_VALUES = 256  # `devices` in a validation: enough to judge, bounded in cost


@dataclass(frozen=True)
class Subject:
    """Who asks for what: the object's kind, namespace (labels None: not known), labels, user."""

    kind: str
    namespace: str
    namespace_labels: dict | None = None
    labels: dict = field(default_factory=dict)
    user: str = ""
    groups: tuple = ()
    obj: dict | None = None


@dataclass
class Claim:
    """One claim (or the claim a legacy ask would become) of the object judged."""

    label: str  # for messages: "claim gpus (template t)", "legacy nvidia.com/gpu of container main"
    spec: ClaimSpec
    legacy: bool = False
    existing: str = ""  # the ResourceClaim's name when the pod names one that exists


@dataclass
class Usage:
    claims: list[Claim] = field(default_factory=list)
    legacy: list[str] = field(default_factory=list)  # "container: resource" asks on the device plugin
    unresolved: list[str] = field(default_factory=list)  # claims the pod names that could not be read


@dataclass(frozen=True)
class Violation:
    rule: str
    actions: tuple
    message: str


@lru_cache(maxsize=1024)
def _program(expression: str):
    return cel.compile_program(expression, REQUEST_VARIABLES)


def applies(rule: Rule, subject: Subject) -> bool:
    """match: every field set holds; exclude: any field set holds."""
    scope = rule.match
    if scope.kinds and subject.kind not in scope.kinds:
        return False
    if scope.namespaces and subject.namespace not in scope.namespaces:
        return False
    if scope.namespaceSelector is not None and not scope.namespaceSelector.matches(subject.namespace_labels or {}):
        return False
    if scope.objectSelector is not None and not scope.objectSelector.matches(subject.labels):
        return False
    return not _exempt(rule, subject)


def _exempt(rule: Rule, subject: Subject) -> bool:
    ex = rule.exclude
    if ex is None:
        return False
    accounts = {f"system:serviceaccount:{a.replace('/', ':', 1)}" for a in ex.serviceAccounts}
    return bool((ex.kinds and subject.kind in ex.kinds) or (ex.namespaces and subject.namespace in ex.namespaces)
                or (ex.namespaceSelector is not None and subject.namespace_labels is not None
                    and ex.namespaceSelector.matches(subject.namespace_labels))
                or (ex.objectSelector is not None and ex.objectSelector.matches(subject.labels))
                or subject.user in ex.users or subject.user in accounts or set(subject.groups) & set(ex.groups))


class _Devices:
    """What each request can take from the inventory, computed once per request."""

    def __init__(self, index: Index | None):
        self.index = index
        self._found: dict[int, list[int]] = {}

    def of(self, req: Request) -> list[int] | None:
        if self.index is None:
            return None
        if id(req) not in self._found:
            self._found[id(req)] = candidates(self.index, req)
        return self._found[id(req)]

    def taken(self, req: Request) -> int | None:
        """Devices the request would be allocated: its count, or for All the most it matches on
        one node (network-attached devices count on every node). None: no inventory to tell."""
        if req.mode != "All":
            return req.count
        found = self.of(req)
        if found is None or self.index is None:
            return None
        per_node = Counter(self.index.devices[p].node for p in found)
        everywhere = per_node.pop(None, 0)
        return max(per_node.values(), default=0) + everywhere

    def variable(self, p: int) -> dict:
        """The CEL `device` of a position `of` gave (so there is an index)."""
        if self.index is None:
            raise ValueError("no inventory: no device positions")
        return self.index.devices[p].variable

    def names(self, positions: list[int]) -> list[str]:
        if self.index is None:
            return []
        return ["/".join(map(str, self.index.devices[p].key[1:])) for p in positions]


def judge(rules: list[Rule], subject: Subject, usage: Usage, index: Index | None,
          namespace_claims=None) -> list[Violation]:
    """Every violation of every rule that applies to the subject, in rule order.
    namespace_claims: () -> the ResourceClaims in the subject's namespace now (None: not known,
    maxDevicesPerNamespace is not judged)."""
    devices = _Devices(index)
    held: list[int] = []
    out = []
    for rule in rules:
        if not applies(rule, subject):
            continue
        found = _rule_findings(rule, subject, usage, devices)
        if rule.maxDevicesPerNamespace and namespace_claims is not None and subject.kind != "ResourceClaimTemplate":
            if not held:
                held.append(_namespace_total(namespace_claims(), subject, usage, devices))
            found.extend(_namespace_findings(rule, subject, usage, devices, held[0]))
        for message in found:
            text = f"{rule.message} ({message})" if rule.message else message
            out.append(Violation(rule.name, tuple(rule.validationActions or ()), f"rule {rule.name}: {text}"))
    return out


def _rule_findings(rule: Rule, subject: Subject, usage: Usage, devices: _Devices) -> list[str]:
    out = []
    if rule.forbidLegacy and usage.legacy:
        out.append(f"legacy GPU requests are not allowed ({', '.join(usage.legacy[:4])}); ask through "
                   "spec.resourceClaims")
    pod_total = 0
    for claim in usage.claims:
        for alternatives in claim.spec.requests:
            for req in alternatives:
                out.extend(_request_findings(rule, subject, claim, req, devices))
        claim_total = _taken(claim.spec, devices)
        if rule.maxDevicesPerClaim and claim_total > rule.maxDevicesPerClaim:
            out.append(f"{claim.label or 'spec'}: {claim_total} devices exceed the limit of "
                       f"{rule.maxDevicesPerClaim} per claim; ask for fewer")
        pod_total += claim_total
    if subject.kind == "Pod" and rule.maxDevicesPerPod and pod_total > rule.maxDevicesPerPod:
        parts = ", ".join(c.label for c in usage.claims)
        out.append(f"the pod's claims together take {pod_total} devices ({parts}), more than the limit of "
                   f"{rule.maxDevicesPerPod} per pod")
    return out


def _taken(spec: ClaimSpec, devices: _Devices) -> int:
    """Devices a claim would take, allocationMode All read on the inventory."""
    return spec.most_devices(devices.taken)


def _namespace_total(claims: list[dict], subject: Subject, usage: Usage, devices: _Devices) -> int:
    """Devices the namespace's claims take now: an allocated claim what it holds, a pending one
    what it asks. The subject's own claims are counted with the subject, not here."""
    own = {c.existing for c in usage.claims if c.existing}
    if subject.kind == "ResourceClaim":
        own.add(view_of(subject.obj).name)
    total = 0
    pod = view_of(subject.obj).name if subject.kind == "Pod" else None
    for claim in claims:
        view = view_of(claim)
        if view.name in own or (pod and view.owned_by("Pod", pod)):
            continue  # counted with the subject (its named claims, the claims stamped for it)
        held = held_devices(claim)
        if held:
            total += len(held)
            continue
        try:
            total += _taken(parse_claim_object(claim), devices)
        except ClaimError:
            continue  # the API server would not have stored it: nothing it takes
    return total


def _namespace_findings(rule: Rule, subject: Subject, usage: Usage, devices: _Devices, held: int) -> list[str]:
    asked = sum(_taken(c.spec, devices) for c in usage.claims)
    if not asked or not rule.maxDevicesPerNamespace or held + asked <= rule.maxDevicesPerNamespace:
        return []
    return [f"namespace {subject.namespace} would take {held + asked} devices ({held} held or asked by its claims "
            f"now, {asked} by this {subject.kind}), more than the limit of {rule.maxDevicesPerNamespace}"]


def _request_findings(rule: Rule, subject: Subject, claim: Claim, req: Request, devices: _Devices) -> list[str]:
    where = _where(claim, req)
    out = []
    if rule.allowedDeviceClasses is not None and req.device_class not in rule.allowedDeviceClasses:
        out.append(f"{where}: DeviceClass {req.device_class!r} is not allowed (allowed: "
                   f"{', '.join(rule.allowedDeviceClasses) or 'none'})")
    if rule.allowAdminAccess is False and req.admin:
        out.append(f"{where}.adminAccess: admin access is not allowed here")
    if rule.adminAccessNamespaces is not None and req.admin and subject.namespace not in rule.adminAccessNamespaces:
        out.append(f"{where}.adminAccess: admin access is allowed only in the namespaces this policy names "
                   f"({', '.join(rule.adminAccessNamespaces) or 'none'}), not {subject.namespace}: the namespace "
                   "label resource.kubernetes.io/admin-access alone is not enough")
    taken = devices.taken(req)
    if rule.maxDevicesPerRequest and taken is not None and taken > rule.maxDevicesPerRequest:
        how = "allocationMode All would take" if req.mode == "All" else "asks for"
        out.append(f"{where}: {how} {taken} devices, more than the limit of {rule.maxDevicesPerRequest} per request")
    for name in rule.requireSelectors:
        if not _selects_on(req, name, devices.index):
            out.append(f"{where}: needs a selector on {name} (for example device.attributes"
                       f"['{name.rpartition('/')[0]}'].{name.rpartition('/')[2]} == ...)")
    unjudged = _uncompiled(req, devices.index) if rule.allowedDevices is not None or rule.validations else None
    if unjudged is not None:  # fail closed: what we cannot read could select any device
        out.append(f"{where}: this rule cannot judge the devices it may get: selector `{unjudged[0]}` does not "
                   f"compile here ({unjudged[1]}); refused until it can be judged")
        return out
    if rule.allowedDevices is not None:
        out.extend(_device_findings(rule.allowedDevices, where, req, devices))
    for check in rule.validations:
        out.extend(_validation_findings(check, subject, claim, req, devices))
    return out


def _selector_expressions(req: Request, index: Index | None) -> list[str]:
    """The request's CEL selectors and its DeviceClass's."""
    expressions = list(req.selectors)
    device_class = index.classes.get(req.device_class) if index is not None else None
    for sel in ((device_class or {}).get("spec") or {}).get("selectors") or []:
        expressions.append(((sel or {}).get("cel") or {}).get("expression", ""))
    return expressions


def _uncompiled(req: Request, index: Index | None) -> tuple[str, str] | None:
    """(expression, why) of the first selector of the request or its class our CEL cannot compile."""
    for expression in _selector_expressions(req, index):
        try:
            cel.compile_selector(expression)
        except cel.CelError as exc:
            return expression, str(exc).splitlines()[0][:200]
    return None


def _where(claim: Claim, req: Request) -> str:
    return f"{claim.label}: {req.path or req.name}" if claim.label else (req.path or req.name)


def _selects_on(req: Request, qualified: str, index: Index | None) -> bool:
    domain, _, name = qualified.rpartition("/")
    for expression in _selector_expressions(req, index):
        try:
            reads = cel.compile_selector(expression).reads
        except cel.CelError:
            continue
        # Fail closed: a selector whose reads are not known (device.attributes.size() > 0) narrows
        # nothing we can name, so it never stands for the required attribute.
        if reads is not None and any(r[1:] == (domain, name) for r in reads if len(r) == 3):
            return True
    return False


def _device_findings(expression: str, where: str, req: Request, devices: _Devices) -> list[str]:
    found = devices.of(req)
    if not found:
        return []
    selector = cel.compile_selector(expression)
    failing = []
    for p in found:
        try:
            if not selector.matches(devices.variable(p)):
                failing.append(p)
        except cel.CelError:
            failing.append(p)
    if not failing:
        return []
    shown = ", ".join(devices.names(failing[:3])) + (f" and {len(failing) - 3} more" if len(failing) > 3 else "")
    return [f"{where}: could be given {len(failing)} device(s) this rule does not allow ({shown}); narrow its "
            f"selectors to devices where `{expression}`"]


def _validation_findings(check, subject: Subject, claim: Claim, req: Request, devices: _Devices) -> list[str]:
    found = devices.of(req) or []
    values = {
        "request": {"name": req.name, "deviceClassName": req.device_class, "allocationMode": req.mode,
                    "count": req.count, "devices": devices.taken(req) or 0, "adminAccess": req.admin,
                    "selectors": list(req.selectors), "claim": claim.label, "legacy": claim.legacy},
        "object": subject.obj or {},
        "namespace": subject.namespace,
        "devices": [devices.variable(p) for p in found[:MAX_DEVICE_VALUES]],
    }
    where = _where(claim, req)
    try:
        result = cel.run_program(_program(check.expression), values)
    except cel.CelError as exc:
        return [f"{where}: `{check.expression}` failed: {exc}"]
    if result is True:
        return []
    if check.messageExpression:
        try:
            text = cel.run_program(_program(check.messageExpression), values)
            if isinstance(text, str) and text:
                return [f"{where}: {text}"]
        except cel.CelError:
            pass  # the static message (or the expression) says it instead
    return [f"{where}: {check.message or f'failed `{check.expression}`'}"]
