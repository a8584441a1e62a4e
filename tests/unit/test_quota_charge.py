"""Issue 34: what the 1.37 quota evaluators charge under requests.R (migration.quota_charge), and
`audit` naming a ResourceQuota whose status.used charges one GPU twice."""

import json

import yaml

from app.cli import main
from app.migration import EXTENDED_CLAIM_ANNOTATION, charged, claim_asks, pod_charge, quota_use
from app.policy import default_policy

RULES = default_policy().migration
DECLARING = {"gpu.nvidia.com": "nvidia.com/gpu"}


def pod(name, gpus=1, namespace="team-a", init=(), **status):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": f"u-{name}"},
            "spec": {"nodeName": "n1", "initContainers": list(init),
                     "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]},
            "status": status}


def claim(name, count=1, cls="gpu.nvidia.com", owner=None, namespace="team-a"):
    meta = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["annotations"] = {EXTENDED_CLAIM_ANNOTATION: "true"}
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": count}}]}}}


def test_a_pod_is_charged_its_containers_or_its_largest_init_container():
    assert pod_charge(pod("a", 2), "nvidia.com/gpu") == 2
    assert pod_charge(pod("done", 2, phase="Succeeded"), "nvidia.com/gpu") == 0
    setup = {"name": "setup", "resources": {"limits": {"nvidia.com/gpu": 3}}}
    assert pod_charge(pod("init", 1, init=[setup]), "nvidia.com/gpu") == 3
    sidecar = {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"nvidia.com/gpu": 1}}}
    assert pod_charge(pod("side", 1, init=[sidecar]), "nvidia.com/gpu") == 2


def test_a_claim_is_charged_its_worst_case_per_class():
    alternatives = {"metadata": {}, "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "small", "deviceClassName": "gpu.nvidia.com"},
        {"name": "mig", "deviceClassName": "mig.nvidia.com", "count": 3}]}]}}}
    assert claim_asks(alternatives) == {"gpu.nvidia.com": 2, "mig.nvidia.com": 3}
    every = {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                         "allocationMode": "All"}}]}}}
    assert claim_asks(every) == {"gpu.nvidia.com": 32}


def test_a_kep_5004_claim_is_charged_only_beyond_what_its_pod_is():
    native = pod("native", 2, extendedResourceClaimStatus={"resourceClaimName": "native-gpu"})
    made = claim("native-gpu", 2, owner=native)
    assert charged([native], [made], "nvidia.com/gpu", DECLARING) == {"team-a": 2}
    # Its pod finished: the claim is charged in full, as upstream's pod usage is then nothing.
    native["status"]["phase"] = "Succeeded"
    assert charged([native], [made], "nvidia.com/gpu", DECLARING) == {"team-a": 2}
    # A claim of a class not declaring the resource is not charged under it.
    assert charged([], [claim("c", 2)], "nvidia.com/gpu", {}) == {}
    rewritten = claim("rewritten", 1)
    assert charged([pod("legacy", 1)], [rewritten], "nvidia.com/gpu", DECLARING) == {"team-a": 2}


def quota(used):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}, "status": {"used": {"requests.nvidia.com/gpu": used}}}


def test_a_quota_charging_more_than_its_pods_and_claims_ask_counts_one_gpu_twice():
    native = pod("native", 1, extendedResourceClaimStatus={"resourceClaimName": "native-gpu"})
    objects = [native, claim("native-gpu", 1, owner=native), pod("legacy", 1)]
    pods, claims = objects[0::2], objects[1:2]
    [fair] = quota_use([quota("2")], pods, claims, RULES, DECLARING)
    assert (fair.used, fair.charged, fair.twice, fair.twice_problem) == (2, 2, 0, None)
    [twice] = quota_use([quota("3")], pods, claims, RULES, DECLARING)
    assert (twice.used, twice.charged, twice.twice) == (3, 2, 1)
    assert "charges 3 under requests.nvidia.com/gpu but its pods and claims ask for 2" in twice.twice_problem
    # No pod of the namespace was read (an export without them): not judged.
    [unread] = quota_use([quota("3")], [], claims, RULES, DECLARING)
    assert (unread.used, unread.twice) == (None, 0)


def test_audit_names_a_budget_counted_twice_and_exits_1(tmp_path, capsys):
    native = pod("native", 1, extendedResourceClaimStatus={"resourceClaimName": "native-gpu"})
    klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"extendedResourceName": "nvidia.com/gpu"}}
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([klass, quota("3"), native, claim("native-gpu", 1, owner=native),
                                          pod("legacy", 1)]))
    assert main(["audit", "-f", str(source)]) == 1
    out = capsys.readouterr().out
    assert "budget: ResourceQuota team-a/gpus requests.nvidia.com/gpu 4: device plugin 1, DRA 0, counted twice 1" \
        in out
    assert "budget counted twice: ResourceQuota team-a/gpus charges 3" in out
    assert main(["audit", "-f", str(source), "-o", "json"]) == 1
    [budget] = json.loads(capsys.readouterr().out)["budgets"]
    assert (budget["used"], budget["charged"], budget["twice"]) == (3, 2, 1) and budget["twiceProblem"]
    source.write_text(yaml.safe_dump_all([klass, quota("2"), native, claim("native-gpu", 1, owner=native),
                                          pod("legacy", 1)]))
    assert main(["audit", "-f", str(source)]) == 0
