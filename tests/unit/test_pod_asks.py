"""Issue 43: one model of a pod's GPU asks. The kubelet and ResourceQuota take the larger of the
init peak and the regular containers plus sidecars (upstream PodRequests); the rollout's room,
the quota charge and the asks model say the same number for the same pod."""

import pytest

from app.application import rollout
from app.migration import legacy_asks, pod_charge
from app.policy import default_policy

RULES = default_policy().migration


def c(name, gpus=None, sidecar=False, requests=None):
    resources = {}
    if gpus is not None:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    if requests is not None:
        resources["requests"] = {"nvidia.com/gpu": requests}
    out = {"name": name, "image": "cuda", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


@pytest.mark.parametrize("init, main, expected", [
    ([c("setup", 1)], [c("main", 1)], 1),  # an init container's GPU is free again when main starts
    ([c("setup", 2)], [c("main", 1)], 2),  # the init peak is larger
    ([c("proxy", 1, sidecar=True)], [c("main", 1)], 2),  # a sidecar runs beside main
    ([c("proxy", 1, sidecar=True), c("setup", 2)], [c("main", 1)], 3),  # setup starts beside the sidecar
    ([c("setup", 2), c("proxy", 1, sidecar=True)], [c("main", 1)], 2),  # the sidecar starts after setup
    ([], [c("a", 1), c("b", 2)], 3),
    ([], [c("main", requests=2, gpus=2)], 2),
    ([], [c("main", "two")], 0),  # not a whole number: the API server refuses such a pod, nothing counts
])
def test_the_effective_ask_is_upstreams_and_every_counter_reads_it(init, main, expected):
    spec = {"initContainers": init, "containers": main}
    pod = {"metadata": {"name": "p", "namespace": "team-a"}, "spec": {**spec, "nodeName": "n0"},
           "status": {"phase": "Running"}}
    assert legacy_asks(spec, RULES).effective("nvidia.com/gpu") == expected
    assert pod_charge(pod, "nvidia.com/gpu") == expected
    views = rollout.pod_views({"pods": [pod]}, default_policy(), rollout.Switches())
    assert (views[0].legacy.get("nvidia.com/gpu", 0) if views else 0) == expected


def test_asks_say_where_they_are_written_and_the_containers_role():
    spec = {"initContainers": [c("proxy", 1, sidecar=True), c("setup", 1)], "containers": [c("main", 1)],
            "ephemeralContainers": [c("debug", 1)]}
    asks = legacy_asks(spec, RULES).asks
    assert [(a.container, a.role, a.path) for a in asks] == [
        ("proxy", "sidecar", "spec.initContainers[0].resources"), ("setup", "init", "spec.initContainers[1].resources"),
        ("main", "regular", "spec.containers[0].resources")]


def test_what_a_claim_holds_is_read_once_for_every_counter():
    from app.application.engine import judging as judge
    from app.application.rollout.pods import _claim_devices
    from app.common import held_devices

    results = [{"request": "r", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0"},
               {"request": "r", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-1"},
               {"request": "w", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-1", "adminAccess": True},
               {"request": "n", "driver": "nic.example.com", "pool": "p", "device": "nic-0"}, "junk"]
    claim = {"metadata": {"name": "c", "namespace": "team-a"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
             "status": {"allocation": {"devices": {"results": results}}}}
    assert len(held_devices(claim)) == 3 and len(held_devices(claim, "gpu.nvidia.com")) == 2
    assert _claim_devices([claim], "gpu.nvidia.com") == {("team-a", "c"): 2}
    subject = judge.Subject("ResourceClaim", "team-a", {}, obj={"metadata": {"name": "other"}})
    assert judge._namespace_total([claim], subject, judge.Usage(), judge._Devices(None)) == 3
    assert held_devices({"status": {"allocation": None}}) == set()
