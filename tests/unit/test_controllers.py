"""`plan` and the controllers that read GPU counts from the objects it rewrites."""

import copy

from app.application.manifests import plan_objects
from app.policy import default_policy
from tests.helpers import container

RULES = default_policy().migration


def template(gpus=2):
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [container("ray-worker", {"nvidia.com/gpu": gpus, "cpu": "4"})]}}


def plan_one(obj):
    result = plan_objects([("test.yaml", [(1, obj)])], default_policy(), "team-a")
    [(original, planned)] = result.objects
    [report] = result.reports
    return original, planned, report


def ray_cluster(**worker):
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "team-a"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {
                "spec": {"containers": [container("ray-head", {"cpu": "2"})]}}},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, **worker, "template": template(2)}]}}


def test_kuberay_gets_an_explicit_num_gpus_when_the_limits_move_to_a_claim():
    _o, planned, report = plan_one(ray_cluster(rayStartParams={}))
    worker = planned["spec"]["workerGroupSpecs"][0]
    assert worker["rayStartParams"]["num-gpus"] == "2"
    assert "nvidia.com/gpu" not in worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "num-gpus" not in planned["spec"]["headGroupSpec"]["rayStartParams"]  # the head has no GPU
    assert any("rayStartParams.num-gpus=2" in r for r in report.reasons)
    assert report.path == "rewrite"


def test_kuberay_num_gpus_set_by_the_owner_is_kept():
    _o, planned, report = plan_one(ray_cluster(rayStartParams={"num-gpus": "1"}))
    assert planned["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] == "1"
    assert not any("num-gpus=" in r for r in report.reasons)


def test_kuberay_inside_a_rayjob_is_found_too():
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j", "namespace": "team-a"},
           "spec": {"entrypoint": "python x.py", "rayClusterSpec": ray_cluster()["spec"]}}
    _o, planned, _r = plan_one(job)
    assert planned["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] == "2"


def test_kueue_workloads_are_left_for_admission():
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"template": {"spec": {**template(1)["spec"], "restartPolicy": "Never"}}}}
    original, planned, report = plan_one(copy.deepcopy(job))
    assert planned == original == job
    assert report.path == "admission" and report.status == "unchanged"
    assert "Kueue" in report.reasons[0] and "quota" in report.reasons[0]


def test_kubeflow_trainer_runtimes_and_auto_nproc_pytorchjobs_are_left_for_admission():
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
               "metadata": {"name": "torch", "namespace": "team-a"},
               "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
                   "template": template(8)}}}]}}}}
    _o, planned, report = plan_one(runtime)
    assert report.path == "admission" and "numProcPerNode" in report.reasons[0]
    assert planned == runtime
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "namespace": "team-a"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": template(4)}}}}
    assert plan_one(copy.deepcopy(job))[2].path == "admission"
    job["spec"]["nprocPerNode"] = "4"  # explicit: nothing is derived from the limits
    assert plan_one(job)[2].path == "rewrite"


def test_workloads_without_gpus_are_not_flagged():
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"template": {"spec": {"containers": [container("c", {"cpu": "1"})]}}}}
    assert plan_one(job)[2].path == "none"


def test_odd_kinds_do_not_break_planning():
    odd = {"apiVersion": "v1", "kind": {"not": "a string"}, "metadata": {"name": "x"},
           "spec": {"template": {"spec": {"containers": [container("c", {"nvidia.com/gpu": 1})]}}}}
    assert plan_one(odd)[2].path == "rewrite"


def test_a_custom_resource_asking_only_another_vendors_gpus_is_not_ours_to_judge():
    """Issue 30: a KServe LLMInferenceService asking only amd.com/gpu was reported needs-attention."""
    service = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
               "metadata": {"name": "llm", "namespace": "team-a"},
               "spec": {"template": {"containers": [{"name": "main", "image": "vllm", "resources": {
                   "limits": {"amd.com/gpu": "1"}, "requests": {"amd.com/gpu": "1"}}}]}}}
    _original, _planned, report = plan_one(service)
    assert (report.status, report.path, report.reasons) == ("unchanged", "none", [])
    service["spec"]["template"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert plan_one(service)[2].status == "needs-attention"  # NVIDIA's: the operator renders its pods


def test_a_hami_pin_to_gpu_indexes_is_kept_on_the_device_plugin_and_named():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "team-a", "annotations": {"nvidia.com/use-gpuindexes": "0,1"}},
           "spec": {"containers": [container("c", {"nvidia.com/gpu": 2})]}}
    original, planned, report = plan_one(pod)
    assert planned == original and report.status == "needs-attention"
    assert "annotation nvidia.com/use-gpuindexes=0,1 pins the pod to GPU indexes" in report.reasons[0]
