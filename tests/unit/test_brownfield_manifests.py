"""Issue 23: what plan/audit say of manifests other projects publish (tests/data/brownfield,
see its PROVENANCE.md), and what the webhook's path choice does with their pods."""

import copy
import pathlib

from app.application.manifests import plan_objects
from app.cli import read_inputs
from app.migration import Facts, choose_path, plan_pod
from app.policy import default_policy

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "brownfield"
RULES = default_policy().migration


def reports(name, rules=RULES):
    result = plan_objects(read_inputs([str(DATA / name)]), default_policy().model_copy(update={"migration": rules}), "default")
    return {f"{r.kind}/{r.name}": r for r in result.reports}, result


def test_a_kueue_cluster_queue_on_gpus_is_reported_not_flagged():
    found, _ = reports("kueue-hami-deployment.yaml")
    queue = found["ClusterQueue/hami-queue"]
    assert queue.status == "unchanged" and queue.path == "quota"
    assert "kueueDeviceClasses" in queue.reasons[0] and "nvidia.com/gpu" in queue.reasons[0]
    assert found["ResourceFlavor/hami-flavor"].path == "none"
    deployment = found["Deployment/gpu-burn"]
    assert deployment.path == "admission" and "Kueue" in deployment.reasons[0]


def test_the_pods_kueue_admits_one_by_one_stay_where_its_quota_counts_them():
    _, result = reports("kueue-hami-deployment.yaml")
    [(deployment, _planned)] = [(o, p) for o, p in result.objects if o["kind"] == "Deployment"]
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": copy.deepcopy(deployment["spec"]["template"]["spec"]),
           "metadata": {"name": "gpu-burn-x", "namespace": "kueue-test",
                        # what Kueue's Deployment integration puts on each pod, and its owner
                        "labels": {"app-name": "gpu-burn", "kueue.x-k8s.io/queue-name": "user-queue"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "gpu-burn-1", "controller": True}]}}
    facts = Facts({}, lambda template, tolerates_cordon=False: ("serves", ""))
    share = choose_path(pod, plan_pod(pod, RULES, "kueue-test"), RULES, "auto", facts)
    assert share.path == "legacy" and share.code == "share"  # HAMi gpucores/gpumem: no shareable device here
    whole = RULES.model_copy(update={"fractional": "wholeDevice"})
    kueue = choose_path(pod, plan_pod(pod, whole, "kueue-test"), whole, "auto", facts)
    assert kueue.path == "legacy" and kueue.code == "kueue" and "user-queue" in kueue.reason


def test_a_scheduler_named_on_a_custom_resource_is_the_scheduler_of_its_pods():
    found, result = reports("volcano-mindspore-gpu-job.yaml")
    job = found["Job/mindspore-gpu"]
    assert job.path == "legacy" and "spec.schedulerName=volcano" in job.reasons[0]
    assert "draSchedulers" in job.reasons[0]
    assert result.objects[0][0] == result.objects[0][1]  # left as it is
    listed = RULES.model_copy(update={"draSchedulers": ["default-scheduler", "volcano"]})
    found, _ = reports("volcano-mindspore-gpu-job.yaml", listed)
    assert found["Job/mindspore-gpu"].path == "rewrite"


def test_gpus_in_a_custom_resources_own_fields_need_attention_with_the_field_named():
    found, _ = reports("dynamo-vllm-agg.yaml")
    graph = found["DynamoGraphDeployment/vllm-agg"]
    assert graph.status == "needs-attention"
    assert "spec.services.worker.resources.limits.gpu=1" in graph.reasons[0]
    assert "migrates those pods at admission" in graph.reasons[0]


def test_tolerating_the_gpu_taint_is_not_a_gpu_request(tmp_path):
    flavor = tmp_path / "flavor.yaml"
    flavor.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n"
                      "spec:\n  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}\n"
                      "  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n"
                      "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n")
    result = plan_objects(read_inputs([str(flavor)]), default_policy(), "default")
    assert result.reports[0].status == "unchanged" and result.reports[0].path == "none"
