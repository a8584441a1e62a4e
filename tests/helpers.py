"""Builders shared by tests."""

import copy
import os

# What could point a command at this machine's cluster or configure it: never in a test's process.
MACHINE_ENV = ("DRA_BRIDGE_", "KUBERNETES_", "KUBECONFIG")


def clean_env(home, *also: str, **extra: str) -> dict:
    """os.environ without MACHINE_ENV (and `also` prefixes), HOME at `home` (no ~/.kube/config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(MACHINE_ENV + also)}
    env["HOME"] = str(home)
    env.update(extra)
    return env


def pod(containers=None, init=None, **spec_extra):
    spec = {"containers": containers or [container("main", {"nvidia.com/gpu": 1})]}
    if init:
        spec["initContainers"] = init
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}, "spec": spec}


def container(name, limits=None, requests=None, **extra):
    c = {"name": name, "image": "cuda:12"}
    resources = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    if resources:
        c["resources"] = resources
    c.update(extra)
    return c


def review(obj, operation="CREATE", uid="uid-1", dry_run=False, namespace="team-a", kind="Pod"):
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": kind.lower() + "s"},
            "requestKind": {"group": "", "version": "v1", "kind": kind},
            "namespace": namespace, "operation": operation,
            "userInfo": {"username": "alice"}, "object": copy.deepcopy(obj), "oldObject": None,
            "dryRun": dry_run, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def as_exactly(request: dict) -> dict:
    """A request as its devices read: a topology `firstAvailable` (aligned, then any) is one ask
    for the same devices, so tests that read `exactly` see its first alternative."""
    if "firstAvailable" in request:
        first = {k: v for k, v in request["firstAvailable"][0].items() if k != "name"}
        return {"name": request["name"], "exactly": first, "firstAvailable": request["firstAvailable"]}
    return request


def template_requests(template: dict) -> list[dict]:
    return [as_exactly(r) for r in template["spec"]["spec"]["devices"]["requests"]]


def requests_of(plan):
    return template_requests(plan.templates[0])


def claims_of(planned_pod, list_name="containers", index=0):
    return planned_pod["spec"][list_name][index].get("resources", {}).get("claims", [])
