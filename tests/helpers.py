"""Builders shared by tests."""

import copy


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


def requests_of(plan):
    return plan.templates[0]["spec"]["spec"]["devices"]["requests"]


def claims_of(planned_pod, list_name="containers", index=0):
    return planned_pod["spec"][list_name][index].get("resources", {}).get("claims", [])
