"""`plan`, `audit` and the kubectl plugin, end to end through the real executables."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from app.common import read_objects
from tests.conftest import ROOT
from tests.kube.fakeapi import FakeKube

INVENTORY = ROOT / "app" / "data" / "example-inventory.yaml"
EXAMPLES = ROOT / "examples"


def run(*args, env=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env=env, input=stdin)


def test_plan_over_the_whole_corpus_accounts_for_every_object(corpus):
    result = run("plan", "-f", str(corpus), "-o", "report", "--inventory", str(INVENTORY))
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    # Every object says which path it takes; pods asking for MIG profiles or UUIDs this inventory
    # lacks stay on the device plugin (legacy), saying why.
    assert all(set(o["path"].split("+")) <= {"none", "native", "rewrite", "legacy", "admission"}
               for o in report["objects"])
    legacy = [o for o in report["objects"] if "legacy" in o["path"]]
    assert legacy and all(any("legacy: " in r or "KAI scheduler" in r for r in o["reasons"]) for o in legacy)
    assert any(any("could never be satisfied here" in r for r in o["reasons"]) for o in legacy)
    assert any(o["path"] == "rewrite" for o in report["objects"])
    statuses = {o["status"] for o in report["objects"]}
    assert statuses <= {"migrated", "unchanged", "unsatisfiable", "needs-attention"}
    total = sum(1 for _ in report["objects"])
    assert f"(of {total} objects)" in result.stderr
    kinds = {(o["kind"], o["status"]) for o in report["objects"]}
    assert ("InferenceService", "needs-attention") in kinds  # GPUs outside any pod template
    assert ("TrainJob", "needs-attention") in kinds
    unsat = [o for o in report["objects"] if o["status"] == "unsatisfiable"]
    assert all(any("unsatisfiable" in r for r in o["reasons"]) for o in unsat)


def test_plan_yaml_of_whole_corpus_validates(corpus):
    """Every object that was schema-valid before stays valid after migration, templates included."""
    import kubernetes_validate

    from app.application.manifests import plan_objects
    from app.cli import read_inputs
    from app.policy import default_policy

    def valid(doc):
        try:
            kubernetes_validate.validate(doc, "1.34.0", strict=True)
            return True
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError):
            return False

    rules = default_policy().migration.model_copy(update={"fractional": "wholeDevice"})  # every share rewritten
    result = plan_objects(read_inputs([str(corpus)]), default_policy().model_copy(update={"migration": rules}), "team-a")
    checked = 0
    for original, planned in result.objects:
        if original != planned and valid(original):
            assert valid(planned), f"{planned.get('kind')}/{planned['metadata'].get('name')}"
            checked += 1
    for template in result.templates.values():
        kubernetes_validate.validate(template, "1.34.0", strict=True)
    assert checked >= 20 and len(result.templates) >= 25
    # The CLI emits exactly these documents.
    out = run("plan", "-f", str(corpus / "legacy" / "nvdp-testdata-job-1.yaml"), "-o", "yaml")
    assert [d["kind"] for d in yaml.safe_load_all(out.stdout) if d] == ["ResourceClaimTemplate", "Job"]


def test_plan_diff_and_no_colour_when_not_a_terminal():
    result = run("plan", "-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml"), "-o", "diff")
    assert "-        nvidia.com/gpu: 1" in result.stdout and "+  resourceClaims:" in result.stdout
    assert "\x1b[" not in result.stderr


def test_audit_from_files_as_policy_reports():
    result = run("audit", "-f", str(EXAMPLES / "workloads" / "training-job.yaml"),
                 "-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml"), "-o", "policyreport",
                 "--inventory", str(INVENTORY))
    assert result.returncode == 0, result.stderr
    reports = {r["metadata"]["namespace"]: r for r in yaml.safe_load_all(result.stdout)}
    assert set(reports) == {"team-a", "default"}
    for r in reports.values():
        assert r["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and r["kind"] == "PolicyReport"
        assert r["summary"]["warn"] == len(r["results"]) == 1
        assert r["results"][0]["properties"]["inventoryChecked"] == "true"


def test_audit_live_cluster_lists_workloads_and_bare_pods_only(tmp_path):
    fake = FakeKube().start()
    try:
        [(_, deployment)] = read_objects(str(EXAMPLES / "workloads" / "inference-deployment.yaml"))
        deployment["metadata"]["namespace"] = "serving"
        fake.add_cluster_object("deployments", deployment)
        owned = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "triton-abc", "namespace": "serving",
                 "ownerReferences": [{"kind": "ReplicaSet", "name": "x", "controller": True, "apiVersion": "apps/v1",
                                      "uid": "u"}]},
                 "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        bare = json.loads(json.dumps(owned))
        bare["metadata"] = {"name": "notebook", "namespace": "research"}
        fake.add_cluster_object("pods", owned)
        fake.add_cluster_object("pods", bare)
        fake.namespaces.update(serving={"dra-bridge.io/migrate": "enabled"}, research={"dra-bridge.io/migrate": "enabled"})
        for _line, obj in read_objects(str(INVENTORY)):
            fake.add_cluster_object("resourceslices" if obj["kind"] == "ResourceSlice" else "deviceclasses", obj)
        result = run("audit", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"), "--inventory", "live", "-o", "json")
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)
        assert rows["inventoryChecked"] is True
        names = sorted((o["namespace"], o["kind"], o["name"], o["status"]) for o in rows["objects"])
        assert names == [("research", "Pod", "notebook", "migrated"),
                         ("serving", "Deployment", "llm-inference", "migrated")]
        # The ReplicaSet's pod is not a row, but it runs unmigrated (admitted while the webhook was
        # unreachable, or before it served): counted, with the controller to restart (issue 22).
        assert rows["unmigratedPods"] == [{"namespace": "serving", "name": "triton-abc", "owner": "ReplicaSet/x"}]
        migrated = json.loads(json.dumps(owned))
        migrated["metadata"]["name"] = "triton-def"
        migrated["spec"] = {"containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
                            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "dra-bridge-1"}]}
        fake.add_cluster_object("pods", migrated)
        table = run("audit", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"), "--inventory", "live")
        assert table.stdout.splitlines()[-1].startswith(
            "1 running pod(s) still hold legacy GPU requests the webhook would rewrite now")
        assert "ReplicaSet serving/x (1)" in table.stdout and "kubectl rollout restart" in table.stdout
        assert not [w for w in fake.writes() if w.path.startswith("/api")]  # read-only
    finally:
        fake.stop()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_plugin(tmp_path):
    plugin_dir = os.path.dirname(shutil.which("kubectl-dra_bridge") or os.path.join(os.path.dirname(sys.executable),
                                                                                     "kubectl-dra_bridge"))
    if not os.path.exists(os.path.join(plugin_dir, "kubectl-dra_bridge")):
        pytest.skip("kubectl-dra_bridge is not installed (pip install -e .)")
    env = {**os.environ, "PATH": f"{plugin_dir}:{os.environ['PATH']}", "KUBECONFIG": str(tmp_path / "none")}
    listed = subprocess.run(["kubectl", "plugin", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert "kubectl-dra_bridge" in listed.stdout
    result = subprocess.run(["kubectl", "dra-bridge", "plan", "-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml")],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(result.stdout) if d]
    assert kinds == ["ResourceClaimTemplate", "Pod"]


def test_audit_reports_api_errors_in_one_line(tmp_path):
    from tests.kube.fakeapi import Fault

    fake = FakeKube().start()
    try:
        fake.faults.append(Fault(status=500, method="GET", path_contains="/pods", times=100))
        result = run("audit", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"))
        assert result.returncode == 3  # an error status: could not ask the cluster
        assert "list pods: API answered 500" in result.stderr and "Traceback" not in result.stderr
    finally:
        fake.stop()


def test_audit_and_plan_say_the_path_of_every_object(tmp_path):
    """Issue 13: native where a class serves the resource, legacy with the reason, rewrite else."""
    inventory = yaml.safe_load_all(INVENTORY.read_text())
    docs = [d for d in inventory if d]
    items = docs[0]["items"] if docs and docs[0].get("kind") == "List" else docs
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "native"},
                  "spec": {"extendedResourceName": "nvidia.com/gpu"}})
    native_inventory = tmp_path / "inventory.yaml"
    native_inventory.write_text(yaml.safe_dump_all(items))
    shared = tmp_path / "hami.yaml"
    shared.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hami"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1,
                                                                           "nvidia.com/gpumem": 8000}}}]}}))
    files = ["-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml"),
             "-f", str(EXAMPLES / "workloads" / "volcano-vgpu-deployment.yaml"),
             "-f", str(EXAMPLES / "workloads" / "ampere-16gb-pod.yaml"), "-f", str(shared)]
    result = run("audit", *files, "-o", "json", "--inventory", str(native_inventory))
    rows = {r["name"]: r for r in json.loads(result.stdout)["objects"]}
    assert rows["cuda-vectoradd"]["path"] == "native"
    assert any("by DeviceClass native" in r for r in rows["cuda-vectoradd"]["reasons"])
    assert rows["notebook-vgpu"]["path"] == "legacy"  # scheduler volcano is not listed as allocating claims
    assert rows["nbody-ampere"]["path"] == "native"  # its GFD nodeSelector still picks the node, as before
    # A share of a GPU is more than native can give, and no device here allows multiple
    # allocations: it stays on the device plugin until policy says what it may cost (issue 23).
    assert rows["hami"]["path"] == "legacy" and rows["hami"]["status"] == "needs-attention"
    assert any("would cost 1 whole GPU(s)" in r and "fractional: wholeDevice" in r for r in rows["hami"]["reasons"])
    table = run("audit", *files, "--inventory", str(native_inventory)).stdout
    assert "PATH" in table.splitlines()[0] and "native" in table
    reports = list(yaml.safe_load_all(run("audit", *files, "-o", "policyreport", "--inventory",
                                          str(native_inventory)).stdout))
    results = {r["resources"][0]["name"]: r["result"] for report in reports for r in report["results"]}
    assert results["cuda-vectoradd"] == "pass" and results["notebook-vgpu"] == "fail"


def test_kai_fractional_pods_are_warned_and_counted_by_audit(tmp_path):
    kai = tmp_path / "kai.yaml"
    kai.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "kai-half", "annotations": {"gpu-fraction": "0.5"}}, "spec": {
        "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]}}))
    rows = json.loads(run("audit", "-f", str(kai), "-o", "json").stdout)["objects"]
    [row] = rows
    assert row["path"] == "legacy" and any("KAI scheduler GPU sharing (gpu-fraction" in r for r in row["reasons"])


def test_gpu_quotas_get_the_device_class_quota_that_counts_migrated_pods(tmp_path):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-1g.10gb": "4", "pods": "50"}}}
    path = tmp_path / "quota.yaml"
    path.write_text(yaml.safe_dump(quota))
    result = run("plan", "-f", str(path))
    [planned] = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert planned["spec"]["hard"] == {**quota["spec"]["hard"],
                                       "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8",
                                       "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}
    import kubernetes_validate
    kubernetes_validate.validate(planned, "1.34.0", strict=True)
    [row] = json.loads(run("audit", "-f", str(path), "-o", "json").stdout)["objects"]
    assert row["kind"] == "ResourceQuota" and any("counted by gpu.nvidia.com.deviceclass" in r for r in row["reasons"])
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({**quota, "spec": {"hard": {"pods": "50"}}}))
    assert json.loads(run("audit", "-f", str(plain), "-o", "json").stdout)["objects"] == []


def test_plan_with_a_namespace_puts_the_object_where_its_templates_go(tmp_path):
    result = run("plan", "-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml"), "-n", "ml")
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    [template] = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    [pod_doc] = [d for d in docs if d["kind"] == "Pod"]
    assert template["metadata"]["namespace"] == "ml" and pod_doc["metadata"]["namespace"] == "ml"


def test_cluster_scoped_objects_with_gpu_pod_templates_are_reported_not_rewritten(tmp_path):
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
               "metadata": {"name": "torch"}, "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
               "template": {"spec": {"template": {"spec": {"containers": [{"name": "t", "image": "i",
               "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}}]}}}}
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime))
    result = run("plan", "-f", str(path), "-n", "ml")
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs == [runtime]  # no namespaced template, no rewrite
    [row] = json.loads(run("plan", "-f", str(path), "-o", "report").stdout)["objects"]
    assert row["status"] == "needs-attention" and "cluster-scoped ClusterTrainingRuntime" in row["reasons"][0]


def test_corpus_plan_against_a_reporter_inventory_with_classes(corpus, tmp_path):
    """Issue 13: `dra-bridge reporter --once` (three fake nodes) plus `dra-bridge classes` as the
    inventory: every corpus object gets a path, and none is refused only because a DeviceClass
    was missing."""
    printed = []
    for description in ("h100x8.yaml", "a100-mig.yaml", "l4x4.yaml"):
        result = run("reporter", "--once", "--backend", f"fake:{ROOT / 'app' / 'data' / 'fake' / description}",
                     "--node-name", description.split(".")[0])
        assert result.returncode == 0, result.stderr
        printed.append(result.stdout)
    slices = tmp_path / "inventory.yaml"
    docs = [d for text in printed for d in yaml.safe_load_all(text) if d]
    unique = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    slices.write_text(yaml.safe_dump_all(list(unique.values())))
    classes = run("classes", "--inventory", str(slices))
    assert classes.returncode == 0, classes.stderr
    inventory = tmp_path / "with-classes.yaml"
    inventory.write_text(slices.read_text() + "---\n" + classes.stdout)
    result = run("plan", "-f", str(corpus), "-o", "report", "--inventory", str(inventory))
    assert result.returncode in (0, 1), result.stderr
    objects = json.loads(result.stdout)["objects"]
    assert all(o["path"] for o in objects)
    assert {"native", "rewrite"} <= {p for o in objects for p in o["path"].split("+")}
    missing = [r for o in objects for r in o["reasons"] if "does not exist" in r and "DeviceClass" in r]
    assert not missing, missing[:3]


def test_nodes_of_a_cluster_export_are_inventory_not_requests():
    """Issue 47: `audit -f` and `plan -f` of an export once flagged every GPU Node needs-attention
    (status.capacity.nvidia.com/gpu read as a request). A Node's capacity is what the device plugin
    advertises: no row, no exit 1 for it."""
    export = ROOT / "examples" / "cluster"
    nodes = [o for _l, o in read_objects(str(export / "nodes.yaml")) if o.get("kind") == "Node"]
    assert any("nvidia.com/gpu" in (n.get("status") or {}).get("allocatable", {}) for n in nodes)
    audited = run("audit", "-f", str(export), "-o", "json")
    rows = json.loads(audited.stdout)["objects"]
    assert rows and not [r for r in rows if r["kind"] == "Node"]
    planned = json.loads(run("plan", "-f", str(export / "nodes.yaml"), "-o", "report").stdout)["objects"]
    assert {(r["kind"], r["status"]) for r in planned} == {("Node", "unchanged")}


NVIDIA_CLASS_WITHOUT_EXTENDED_NAME = {  # as NVIDIA's GPU Operator 26.7 renders it
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                  "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


@pytest.mark.parametrize("extended, named", [(None, True), ("nvidia.com/gpu", False)])
def test_audit_says_once_why_the_native_path_is_never_taken(tmp_path, extended, named):
    """Issue 47: a class selecting NVIDIA's devices without extendedResourceName serves no
    `nvidia.com/gpu` pod natively; audit says so once, with the fix."""
    device_class = json.loads(json.dumps(NVIDIA_CLASS_WITHOUT_EXTENDED_NAME))
    if extended:
        device_class["spec"]["extendedResourceName"] = extended
    second = {**GPU_POD, "metadata": {"name": "q", "namespace": "team-a"}}
    path = tmp_path / "export.yaml"
    path.write_text(yaml.safe_dump_all([device_class, GPU_POD, second]))
    report = json.loads(run("audit", "-f", str(path), "-o", "json").stdout)
    lines = report["nativePath"]
    assert len(lines) == (1 if named else 0)
    if named:
        assert lines[0].startswith("nvidia.com/gpu: DeviceClass gpu.nvidia.com") and "extendedResourceName" in lines[0]
        assert "dra-bridge classes" in lines[0]
        table = run("audit", "-f", str(path)).stdout
        assert table.count("native path: nvidia.com/gpu") == 1


def test_plan_check_and_classes_read_the_cluster_their_kubeconfig_names(tmp_path):
    """Issue 55: --kubeconfig / --context on every command that can read a cluster. No ambient
    kubeconfig (HOME elsewhere, no KUBECONFIG): only the flag points them at the cluster."""
    from tests.helpers import clean_env

    fake = FakeKube().start()
    try:
        for _line, obj in read_objects(str(INVENTORY)):
            fake.add_cluster_object("resourceslices" if obj["kind"] == "ResourceSlice" else "deviceclasses", obj)
        config = fake.kubeconfig(tmp_path / "kc")
        env = clean_env(tmp_path)
        claim = str(EXAMPLES / "claims" / "one-gpu.yaml")
        workload = str(EXAMPLES / "workloads" / "inference-deployment.yaml")
        for args in (("check", "-f", claim), ("plan", "-f", workload, "-o", "report"), ("classes",)):
            result = run(*args, "--inventory", "live", "--kubeconfig", config, env=env)
            assert result.returncode in (0, 1), (args, result.stderr)
            assert f"live cluster {fake.url}" in result.stderr, (args, result.stderr)
            unset = run(*args, "--inventory", "live", env=env)  # nothing configured: said, exit 2
            assert unset.returncode == 2, (args, unset.stderr)
        dead = run("check", "-f", claim, "--inventory", "live", "--kubeconfig", config, "--request-timeout", "2",
                   "--context", "nope", env=env)
        assert dead.returncode == 2 and "nope" in dead.stderr, dead.stderr
    finally:
        fake.stop()
    gone = run("check", "-f", claim, "--inventory", "live", "--kubeconfig", config, "--request-timeout", "2", env=env)
    assert gone.returncode == 3, gone.stderr  # could not ask the cluster: never read as an answer


def test_audit_of_a_cluster_judges_with_the_policy_its_replicas_enforce(tmp_path):
    """Issue 55: `audit` read the bundled policy, not the one the webhook enforces. Now the
    ConfigMap the replicas load (where refused, the copy they kept), said with its digest;
    --policy FILE still wins."""
    from app.kube import policy_digest

    fake = FakeKube().start()
    try:
        bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": "research"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        fake.add_cluster_object("pods", bare)
        fake.namespaces.update(research={"dra-bridge.io/migrate": "enabled"})
        config = fake.kubeconfig(tmp_path / "kc")

        def statuses(*extra):
            result = run("audit", "--kubeconfig", config, "-o", "json", *extra)
            assert result.returncode in (0, 1), result.stderr
            return [o["status"] for o in json.loads(result.stdout)["objects"]], result.stderr

        got, said = statuses()
        assert got == ["migrated"] and "policy in force: the bundled default (no ConfigMap dra-bridge/" in said
        off = "namespaces:\n- names: [research]\n  migrate: false\n"
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dra-bridge-policy", "namespace": "dra-bridge"},
              "data": {"policy.yaml": off}}
        fake.objects[("dra-bridge", "configmaps", "dra-bridge-policy")] = cm
        got, said = statuses()
        assert got == ["unchanged"], got  # what the replicas enforce: migration off there
        assert f"policy in force: ConfigMap dra-bridge/dra-bridge-policy, policy {policy_digest(off)}" in said
        file = tmp_path / "mine.yaml"
        file.write_text("{}\n")
        assert statuses("--policy", str(file))[0] == ["migrated"]  # a file named wins
        # Refused where it is mounted: the replicas enforce the copy they kept, and so does audit.
        fake.objects[("dra-bridge", "configmaps", "dra-bridge-policy")] = {**cm, "data": {"policy.yaml": "defaults: [\n"}}
        fake.objects[("dra-bridge", "configmaps", "dra-bridge-policy-last-good")] = {
            **cm, "metadata": {"name": "dra-bridge-policy-last-good", "namespace": "dra-bridge"},
            "data": {"policy.yaml": off, "digest": policy_digest(off)}}
        got, said = statuses()
        assert got == ["unchanged"] and "the replicas' last good copy dra-bridge/dra-bridge-policy-last-good" in said
        from tests.kube.fakeapi import Fault
        fake.faults.append(Fault(status=403, path_contains="configmaps/dra-bridge-policy", times=5))
        denied = run("audit", "--kubeconfig", config)
        assert denied.returncode == 3 and "--policy FILE judges with a file instead" in denied.stderr, denied.stderr
    finally:
        fake.stop()


def test_plan_and_check_on_a_live_inventory_judge_with_the_policy_in_force(tmp_path):
    """Issue 55: with `--inventory live`, plan judged with the bundled policy and check with no rules,
    whatever the replicas enforce. Now both read the served ConfigMap (said, with its digest);
    --policy FILE wins; offline they judge as before."""
    from app.kube import policy_digest

    fake = FakeKube().start()
    try:
        config = fake.kubeconfig(tmp_path / "kc")
        pod = tmp_path / "pod.yaml"
        pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": "notebook", "namespace": "research"},
                                       "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                                           "limits": {"nvidia.com/gpu": 1}}}]}}))
        claim = tmp_path / "claim.yaml"
        claim.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                         "metadata": {"name": "big", "namespace": "research"},
                                         "spec": {"devices": {"requests": [{"name": "g", "exactly": {
                                             "deviceClassName": "gpu.nvidia.com", "count": 3}}]}}}))

        def plan_status(*extra):
            result = run("plan", "-f", str(pod), "--inventory", "live", "--kubeconfig", config, "-o", "report", *extra)
            assert result.returncode in (0, 1), result.stderr
            found = json.loads(result.stdout)["objects"][0]
            return (found["status"], found["path"], " ".join(found["reasons"])), result.stderr

        def check(*extra):
            result = run("check", "-f", str(claim), "--inventory", "live", "--kubeconfig", config, "-o", "json",
                         *extra)
            assert result.returncode in (0, 1), result.stderr
            return json.loads(result.stdout)[0], result.stderr

        # An empty inventory: the pod stays on the device plugin (as the webhook keeps it), but by the
        # path choice, not because migration is off there.
        status, said = plan_status()
        assert "migrate: false" not in status[2] and "policy in force: the bundled default" in said, (status, said)
        assert check()[0]["policy"] != "deny"  # the bundled default is in warn mode
        served = ("namespaces:\n- names: [research]\n  migrate: false\n"
                  "rules:\n- name: four-max\n  validationActions: [Deny]\n  maxDevicesPerClaim: 2\n")
        fake.objects[("dra-bridge", "configmaps", "dra-bridge-policy")] = {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dra-bridge-policy", "namespace": "dra-bridge"},
            "data": {"policy.yaml": served}}
        status, said = plan_status()
        assert "migrate: false" in status[2], (status, said)  # migration is off there in the policy served
        assert f"policy in force: ConfigMap dra-bridge/dra-bridge-policy, policy {policy_digest(served)}" in said
        row, said = check()
        assert row["policy"] == "deny" and "four-max" in " ".join(row["policyMessages"]), row
        assert "policy in force: ConfigMap dra-bridge/dra-bridge-policy" in said
        file = tmp_path / "mine.yaml"
        file.write_text("{}\n")
        assert "migrate: false" not in plan_status("--policy", str(file))[0][2]  # a file named wins
        assert check("--policy", str(file))[0]["policy"] != "deny"
        offline = run("plan", "-f", str(pod), "-o", "report")
        assert json.loads(offline.stdout)["objects"][0]["status"] != "unchanged" and "policy in force" not in \
            offline.stderr
    finally:
        fake.stop()


def test_policy_reports_cover_every_namespace_audited_so_a_clean_one_replaces_its_old_report(tmp_path):
    """Issue 55: a namespace that became clean kept its old `fail` report, and a clean cluster
    printed nothing (`kubectl apply -f -` then fails). Every namespace audited gets its report."""
    fake = FakeKube().start()
    try:
        bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": "research"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        fake.add_cluster_object("pods", bare)
        fake.namespaces.update(research={"dra-bridge.io/migrate": "enabled"}, clean={})
        config = fake.kubeconfig(tmp_path / "kc")
        everything = run("audit", "--kubeconfig", config, "-o", "policyreport")
        assert everything.returncode in (0, 1), everything.stderr
        reports = {d["metadata"]["namespace"]: d for d in yaml.safe_load_all(everything.stdout) if d}
        assert {"research", "clean"} <= set(reports)
        assert reports["research"]["results"] and reports["clean"]["results"] == []
        assert reports["clean"]["summary"] == {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
        one = run("audit", "--kubeconfig", config, "-n", "clean", "-o", "policyreport")
        [report] = [d for d in yaml.safe_load_all(one.stdout) if d]
        assert (report["kind"], report["metadata"]["namespace"], report["results"]) == ("PolicyReport", "clean", [])
    finally:
        fake.stop()
