"""KEP-5729 on a real control plane (GenericWorkload and DRAWorkloadResourceClaims on): the
resourceclaim controller gives a pod the claim its PodGroup shares when the pod's claim entry has
the group's name and template. The webhook reads the group and names its entry so that a
rewritten pod keeps devices of its own (the control pod, written by hand with the group's entry,
shows the controller shares)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import Webhook, install, own_plane, requires_kube, wait_for

pytestmark = requires_kube("1.37", "PodGroups share claims from 1.37 (scheduling.k8s.io/v1beta1; v1alpha2 on 1.36)")

GATES = {"GenericWorkload": True, "DRAWorkloadResourceClaims": True}
SHARED = "dra-bridge-gpus"  # the rewrite's entry name (policy migration.claimName)


@pytest.fixture(scope="module")
def grouped(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "pod-groups", gates=GATES,
                   runtime_config="scheduling.k8s.io/v1beta1=true") as plane:
        install(plane)
        server = Webhook(plane).start()
        plane.apply(server.configurations())
        try:
            yield plane
        finally:
            server.stop()


def gpu_pod(name: str, group: str | None = None, claims: list[dict] | None = None) -> dict:
    spec = {"containers": [{"name": "main", "image": "cuda:12",
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if claims:
        spec["resourceClaims"] = claims
        spec["containers"][0]["resources"] = {"claims": [{"name": claims[0]["name"]}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}


def read_pod(plane, name: str) -> dict:
    return json.loads(plane.kubectl("get", "pod", name, "-n", "team-a", "-o", "json").stdout)


def claim_of(plane, name: str) -> dict | None:
    """The ResourceClaim the controller made for the pod's first claim entry (None: not yet)."""
    statuses = read_pod(plane, name).get("status", {}).get("resourceClaimStatuses") or []
    if not statuses or not statuses[0].get("resourceClaimName"):
        return None
    return json.loads(plane.kubectl("get", "resourceclaim", statuses[0]["resourceClaimName"], "-n", "team-a",
                                    "-o", "json").stdout)


def owner_kind(claim: dict) -> str:
    return next(o["kind"] for o in claim["metadata"]["ownerReferences"] if o.get("controller"))


def test_a_rewritten_pod_in_a_group_keeps_its_own_devices(grouped):
    grouped.apply([gpu_pod("alone")])
    [entry] = read_pod(grouped, "alone")["spec"]["resourceClaims"]
    template = entry["resourceClaimTemplateName"]  # what the webhook writes for this shape
    assert entry["name"] == SHARED
    grouped.apply([{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": "team-a"},
                    "spec": {"schedulingPolicy": {"basic": {}},
                             "resourceClaims": [{"name": SHARED, "resourceClaimTemplateName": template}]}}])
    # The control: a pod written with the group's own entry gets the group's claim.
    grouped.apply([gpu_pod("by-hand", "train", [{"name": SHARED, "resourceClaimTemplateName": template}])])
    shared = wait_for(lambda: claim_of(grouped, "by-hand"), 60, "the by-hand pod's claim")
    assert owner_kind(shared) == "PodGroup"
    grouped.apply([gpu_pod("worker-0", "train"), gpu_pod("worker-1", "train")])
    mine = []
    for name in ("worker-0", "worker-1"):
        [entry] = read_pod(grouped, name)["spec"]["resourceClaims"]
        assert (entry["name"], entry["resourceClaimTemplateName"]) == (f"{SHARED}-2", template)
        claim = wait_for(lambda: claim_of(grouped, name), 60, f"{name}'s claim")
        assert owner_kind(claim) == "Pod" and claim["metadata"]["name"] != shared["metadata"]["name"]
        mine.append(claim["metadata"]["name"])
    assert len(set(mine)) == 2
