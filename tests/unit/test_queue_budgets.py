"""Issue 34: per Kueue ClusterQueue, what its pods hold of a GPU resource on both sides against
what Kueue reserves, and the devices that escape its count."""

from app.migration import KueueView, queue_use
from app.policy import default_policy

RULES = default_policy().migration
GPU_CLASS = "gpu.nvidia.com"
MAPPED = KueueView({GPU_CLASS: "nvidia.com/gpu"}, dra_gate=True)


def cluster_queue(name="research", gpus="4", reserved=None, cpu="10"):
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    out = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
           "spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"],
                                        "flavors": [{"name": "default", "resources": resources}]}]}}
    if reserved is not None:
        out["status"] = {"flavorsReservation": [{"name": "default", "resources": [
            {"name": "cpu", "total": "3"}, {"name": "nvidia.com/gpu", "total": str(reserved)}]}]}
    return out


LOCAL = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "team", "namespace": "team-a"}, "spec": {"clusterQueue": "research"}}


def pod(name, gpus=0, claims=(), owner=None, label=True, namespace="team-a", **status):
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": "team"} if label else {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
    status = {"phase": "Running", **status}
    if claims:
        status["resourceClaimStatuses"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return {"kind": "Pod", "metadata": meta, "status": status,
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": limits}}]}}


def claim(name, devices, cls=GPU_CLASS, namespace="team-a"):
    return {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": devices}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": f"gpu-{i}"}
                for i in range(devices)]}}}}


def workload(name, owner_uid, gpus, queue="research"):
    return {"kind": "Workload", "metadata": {"name": name, "namespace": "team-a",
                                             "ownerReferences": [{"kind": "Job", "name": name, "uid": owner_uid}]},
            "status": {"admission": {"clusterQueue": queue, "podSetAssignments": [
                {"name": "main", "resourceUsage": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}]}}}


def use_of(queues, pods, claims, workloads=(), view=MAPPED, listed=(), extended=None):
    return queue_use(queues, [LOCAL], list(workloads), pods, claims, RULES, extended or {}, view, listed)


def test_a_job_admitted_from_its_template_counts_its_rewritten_pods():
    # Kueue reserved 2 GPUs for the Job's template; one pod holds a device plugin GPU, one a claim.
    pods = [pod("j-0", 1, owner=("Job", "train"), label=False),
            pod("j-1", claims=["j-1-gpu"], owner=("Job", "train"), label=False)]
    [use] = use_of([cluster_queue(reserved=2)], pods, [claim("j-1-gpu", 1)], [workload("train", "uid-train", 2)],
                   view=KueueView())
    assert (use.queue, use.resource, use.quota, use.plugin, use.dra, use.reserved, use.escaped) == \
        ("research", "nvidia.com/gpu", 4, 1, 1, 2, 0)
    assert use.problem is None and use.namespaces == ["team-a"]


def test_pods_holding_more_than_their_workload_reserved_escape():
    # Kueue's DRA gate was off when it admitted: it reserved no GPU for the claims.
    pods = [pod("p", claims=["p-gpu"], owner=("ReplicaSet", "rs"))]
    admitted = workload("pod-p", "uid-p", 0)
    [use] = use_of([cluster_queue(reserved=0)], pods, [claim("p-gpu", 2)], [admitted])
    assert (use.dra, use.escaped, use.escaped_classes) == (2, 2, [GPU_CLASS])
    assert "ClusterQueue research limits nvidia.com/gpu (4) but does not count 2 device(s) of DeviceClass " \
        "gpu.nvidia.com its pods hold: 2 in use, Kueue reserves 0" in use.problem


def test_without_workloads_a_per_pod_claim_escapes_unless_kueue_maps_its_class():
    pods = [pod("p", claims=["p-gpu"], owner=("ReplicaSet", "rs")), pod("q", 1, owner=("ReplicaSet", "rs"))]
    claims = [claim("p-gpu", 2)]
    [mapped] = use_of([cluster_queue()], pods, claims)
    assert (mapped.plugin, mapped.dra, mapped.reserved, mapped.escaped) == (1, 2, None, 0)
    [gate_off] = use_of([cluster_queue()], pods, claims, view=KueueView({GPU_CLASS: "nvidia.com/gpu"}))
    assert (gate_off.escaped, gate_off.escaped_classes) == (2, [GPU_CLASS])
    [elsewhere] = use_of([cluster_queue()], pods, claims, view=KueueView({GPU_CLASS: "example.com/gpu"}, True))
    assert elsewhere.escaped == 2
    # Kueue's configuration not read: the policy's list says what it maps.
    assert use_of([cluster_queue()], pods, claims, view=None, listed=[GPU_CLASS])[0].escaped == 0
    assert use_of([cluster_queue()], pods, claims, view=None)[0].escaped == 2


def test_held_beyond_the_queues_whole_reservation_escapes():
    pods = [pod("a", 2, owner=("ReplicaSet", "rs")), pod("b", claims=["b-gpu"], owner=("ReplicaSet", "rs"))]
    [use] = use_of([cluster_queue(reserved=1)], pods, [claim("b-gpu", 1)])
    assert (use.plugin, use.dra, use.reserved, use.escaped) == (2, 1, 1, 2)


def test_a_native_pods_claim_is_counted_through_its_own_request():
    native = pod("n", 1, owner=("ReplicaSet", "rs"), extendedResourceClaimStatus={"resourceClaimName": "n-ext"})
    [use] = use_of([cluster_queue()], [native], [claim("n-ext", 1)], view=KueueView(),
                   extended={GPU_CLASS: "nvidia.com/gpu"})
    assert (use.plugin, use.dra, use.escaped) == (0, 1, 0)


def test_what_is_not_the_queues_or_not_running_is_left_out():
    pods = [pod("other", 3, namespace="team-b"), pod("unlabelled", 3, label=False),
            pod("done", 3, phase="Succeeded"), pod("nic", claims=["nic"]),
            pod("s1", claims=["shared"]), pod("s2", claims=["shared"])]
    claims = [claim("nic", 1, cls="nic.example.com"), claim("shared", 1)]
    [use] = use_of([cluster_queue()], pods, claims)
    assert (use.plugin, use.dra, use.escaped) == (0, 1, 0)  # a shared claim's device once


def test_queues_without_a_gpu_quota_have_no_entry():
    cpu_only = {"kind": "ClusterQueue", "metadata": {"name": "cpu"}, "spec": {"resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}}
    assert use_of([cpu_only], [pod("a", 1)], []) == []


def test_audit_names_an_escaped_queue_budget_and_exits_1(tmp_path, capsys):
    import json

    import yaml

    from app.cli import main
    objects = [cluster_queue(reserved=0), LOCAL, pod("p", claims=["p-gpu"], owner=("ReplicaSet", "rs")),
               claim("p-gpu", 2)]
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all(objects))
    assert main(["audit", "-f", str(source)]) == 1
    out = capsys.readouterr().out
    assert "budget: ClusterQueue research nvidia.com/gpu 4: device plugin 0, DRA 2, Kueue reserves 0, escaped 2" in out
    assert "escaped budget: ClusterQueue research limits nvidia.com/gpu (4) but does not count 2 device(s)" in out
    assert main(["audit", "-f", str(source), "-o", "json"]) == 1
    [queue] = json.loads(capsys.readouterr().out)["queueBudgets"]
    assert (queue["queue"], queue["escaped"], queue["escaped_classes"]) == ("research", 2, [GPU_CLASS])


def test_audit_of_a_queue_whose_kueue_counts_the_claims_exits_0(tmp_path, capsys):
    import yaml

    from app.cli import main
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                 "data": {"controller_manager_config.yaml": yaml.safe_dump(
                     {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "featureGates": {"DynamicResourceAllocation": True},
                      "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu",
                                                              "deviceClassNames": [GPU_CLASS]}]}})}}
    objects = [cluster_queue(reserved=2), LOCAL, configmap, pod("p", claims=["p-gpu"], owner=("ReplicaSet", "rs")),
               claim("p-gpu", 2)]
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all(objects))
    assert main(["audit", "-f", str(source)]) == 0, capsys.readouterr()
    assert "budget: ClusterQueue research nvidia.com/gpu 4: device plugin 0, DRA 2, Kueue reserves 2\n" in \
        capsys.readouterr().out
