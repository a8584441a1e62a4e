"""Issues 46 and 55 on a control plane of its own: an operator's whole week, each documented
step in order, run as written: the README's install (certs overlay, kubectl apply -k), warn,
enforce (a bad policy refused at apply time), a bad push that lands while dra-bridge is down and
the restart on it (the last good policy serves), rollback (docs/operations.md), upgrade (a new
image in the overlay, the admin's policy kept), uninstall (exit 0, twice, nothing of ours left);
then the same week with Helm from the chart's README (install, the policy edit, upgrade with
--reuse-values, rollback, uninstall twice). No kubelet runs here: the webhook runs on loopback
(the overlay points the API server at it) and a helper plays the kubelet mounting the policy
ConfigMap."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import threading

import pytest
import yaml

from tests.conftest import ROOT
from app.certs.bundle import Bundle
from tests.e2e.conftest import NVIDIA_CLASSES, Webhook, own_plane, reporter_kubeconfig, run_reporter, wait_for
from tests.helm.conftest import helm  # noqa: F401 - the fixture: helm built from its module, or a skip

pytestmark = pytest.mark.timeout(1200)
RUNBOOK = (ROOT / "docs" / "operations.md").read_text()
README = (ROOT / "README.md").read_text()
CHART_README = (ROOT / "charts" / "dra-bridge" / "README.md").read_text()
OURS = "app.kubernetes.io/managed-by=dra-bridge"


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "lifecycle") as cluster:
        yield cluster


def runbook_block(heading: str) -> str:
    section = RUNBOOK[RUNBOOK.index(heading):]
    return re.search(r"```sh\n(.*?)```", section, re.S)[1]


def shell(plane, script: str, tmp_path, tools: str = "") -> subprocess.CompletedProcess:
    """tools: another folder of programs the script calls (helm's)."""
    path = ":".join(filter(None, (tools, str(plane.bin), os.environ["PATH"])))
    env = {**os.environ, "KUBECONFIG": plane.admin_kubeconfig, "PATH": path,
           "HOME": str(tmp_path), "USER": "admin-anna", "PYTHONPATH": str(ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("DRA_BRIDGE_")}
    dra_bridge = f'dra-bridge() {{ "{sys.executable}" -m app "$@"; }}\n'  # as `pip install` puts it on PATH
    return subprocess.run(["bash", "-e", "-c", dra_bridge + script], capture_output=True, text=True, env=env,
                          timeout=240, cwd=tmp_path)


def point_at_loopback(overlay: pathlib.Path, port: int) -> None:
    """What a kubelet and the Service would give: the API server reaches the webhook, here on
    loopback. An admin's patch in the admin's overlay, so each documented `apply -k` keeps it."""
    doc = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    for kind, count in (("MutatingWebhookConfiguration", 1), ("ValidatingWebhookConfiguration", 2)):
        ops = []
        for i in range(count):
            hook = f"/webhooks/{i}/clientConfig"
            path = "/validate-policy" if i == 1 else ("/mutate" if kind.startswith("Mutating") else "/validate")
            ops += [{"op": "remove", "path": f"{hook}/service"},
                    {"op": "add", "path": f"{hook}/url", "value": f"https://127.0.0.1:{port}{path}"}]
        doc["patches"].append({"target": {"kind": kind, "name": "dra-bridge"}, "patch": yaml.safe_dump(ops)})
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def mount_policy(plane, path: pathlib.Path) -> None:
    """The kubelet's part: the ConfigMap's policy.yaml at the mounted path, absent with it."""
    got = plane.kubectl("get", "configmap", "dra-bridge-policy", "-n", "dra-bridge", "-o", "json", check=False)
    if got.returncode != 0:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.loads(got.stdout)["data"]["policy.yaml"])


@contextlib.contextmanager
def kubelet_finishing_pods(plane):
    """The kubelet's part in a namespace's deletion: pods bound to a node, once terminating, go."""
    done = threading.Event()

    def finish():
        while not done.wait(1):
            for pod in plane.json("pods", "-A")["items"]:
                meta = pod["metadata"]
                if meta.get("deletionTimestamp"):
                    plane.kubectl("delete", "pod", meta["name"], "-n", meta["namespace"], "--force",
                                  "--grace-period=0", "--wait=false", check=False)
    thread = threading.Thread(target=finish, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "too-many", "namespace": "team-a"},
         "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                         "count": 99}}]}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "team-a"},
       "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def claim_apply(plane, *extra: str) -> subprocess.CompletedProcess:
    return plane.kubectl("apply", *extra, "-f", "-", input=json.dumps(CLAIM), check=False)


def rewritten(plane) -> bool:
    got = plane.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(POD))
    return bool(json.loads(got.stdout)["spec"].get("resourceClaims"))


def test_install_warn_enforce_rollback_upgrade_uninstall(plane, helm, tmp_path):
    # The shipped tree names no image: a plain `kubectl apply -k manifests/` refuses, creating nothing.
    plain = shell(plane, f"kubectl apply -k {ROOT / 'manifests'}", tmp_path)
    assert plain.returncode != 0 and "no image set" in plain.stderr, plain.stderr
    assert plane.kubectl("get", "namespace", "dra-bridge", check=False).returncode != 0
    # Install: README's certs command (plus --host: here the API server dials loopback), apply -k.
    install = re.search(r"^dra-bridge certs .*$", README, re.M)[0].replace("manifests/", f"{ROOT}/manifests/")
    written = shell(plane, install + " --host 127.0.0.1", tmp_path)
    assert written.returncode == 0, written.stderr
    installed = shell(plane, "kubectl apply -k ~/dra-bridge-deploy", tmp_path)
    assert installed.returncode == 0, installed.stderr
    overlay = tmp_path / "dra-bridge-deploy"
    pki = Bundle(str(overlay / "ca.crt"), str(overlay / "tls.crt"), str(overlay / "tls.key"))
    webhook = Webhook(plane, "--policy-optional", "--reload-interval", "1", bundle=pki)
    policy_file = plane.dir / "policy.yaml"  # serve's --policy: the ConfigMap's mount
    policy_file.unlink()
    point_at_loopback(overlay, webhook.port)
    try:
        _lifecycle(plane, webhook, overlay, policy_file, tmp_path)
    finally:
        webhook.stop()
    _helm_week(plane, helm, tmp_path)


def _helm_week(plane, helm, tmp_path):
    """The same week with Helm, from the chart README as written: install, the documented policy
    edit, an upgrade that keeps it, rollback, the uninstall twice, then docs/operations.md's."""
    tools = str(helm.parent)
    blocks = re.findall(r"```sh\n(.*?)```", CHART_README, re.S)
    install = blocks[0].replace("charts/dra-bridge", str(ROOT / "charts" / "dra-bridge"))
    installed = shell(plane, install, tmp_path, tools)
    assert installed.returncode == 0, installed.stderr
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"namespaces": [{"names": ["team-a"], "mode": "enforce"}]}))
    edited = shell(plane, "kubectl -n dra-bridge create configmap dra-bridge-policy --from-file=policy.yaml "
                          "--dry-run=client -o yaml | kubectl apply -f -", tmp_path)
    assert edited.returncode == 0, edited.stderr
    chart = str(ROOT / "charts" / "dra-bridge")
    upgraded = shell(plane, f"helm upgrade dra-bridge {chart} -n dra-bridge --reuse-values --set image.tag=0.2.0",
                     tmp_path, tools)
    assert upgraded.returncode == 0, upgraded.stderr
    deployment = plane.json("deployment", "dra-bridge", "-n", "dra-bridge")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.2.0")
    policy = plane.json("configmap", "dra-bridge-policy", "-n", "dra-bridge")["data"]["policy.yaml"]
    assert "enforce" in policy  # the admin's edit, kept by the upgrade
    rolled = shell(plane, "helm rollback dra-bridge 1 -n dra-bridge", tmp_path, tools)
    assert rolled.returncode == 0, rolled.stderr  # revision 1 rendered no policy: nothing to fight over
    deployment = plane.json("deployment", "dra-bridge", "-n", "dra-bridge")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.1.0")
    for attempt in ("first", "second"):
        gone = shell(plane, blocks[-1], tmp_path, tools)
        assert gone.returncode == 0, (attempt, gone.stderr)
    assert plane.json("configmap", "dra-bridge-policy", "-n", "dra-bridge")["data"]["policy.yaml"] == policy
    with kubelet_finishing_pods(plane):
        done = shell(plane, runbook_block("## Uninstall"), tmp_path)
        assert done.returncode == 0, done.stderr
    assert plane.kubectl("get", "configmap", "dra-bridge-policy", "-n", "dra-bridge", check=False).returncode != 0
    assert plane.kubectl("get", "mutatingwebhookconfiguration", "dra-bridge", check=False).returncode != 0
    assert not [r for r in plane.json("clusterroles")["items"] if r["metadata"]["name"].startswith("dra-bridge")]


def _bad_push_while_down_then_restart(plane, webhook, policy_file, tmp_path):
    """Issue 55's week: the bad push lands while dra-bridge is down (the policy webhook is Ignore),
    then the replica restarts on it: it starts on the last good policy, ready, and says so where
    the runbook looks; the admin's fix is taken at the next reload."""
    push = ("kubectl -n dra-bridge create configmap dra-bridge-policy --from-file=policy.yaml "
            "--dry-run=client -o yaml | kubectl apply -f -")
    readyz = lambda: json.loads(webhook.get("/readyz")[1])["detail"]["policy"]  # noqa: E731
    enforced = readyz()["digest"]
    wait_for(lambda: plane.kubectl("get", "configmap", "dra-bridge-policy-last-good", "-n", "dra-bridge", "-o",
                                   "jsonpath={.data.digest}", check=False).stdout == enforced, 30,
             "the policy in force kept beside the admin's")
    webhook.stop()
    landed = shell(plane, push, tmp_path)  # policy.yaml still holds the refused `enforcee`
    assert landed.returncode == 0, landed.stderr  # nothing judges it: the webhook is down
    mount_policy(plane, policy_file)
    webhook.start()  # ready on the refused file, or it raises with the replica's log
    status = readyz()
    assert status["digest"] == enforced and "defaults.mode" in status["rejected"], status
    assert "last good policy kept in ConfigMap dra-bridge/dra-bridge-policy-last-good" in status["source"]
    assert claim_apply(plane, "--dry-run=server").returncode != 0  # still enforcing
    assert rewritten(plane)  # still migrating
    # Where the runbook looks first (its second block's first line): the Event names the field.
    describe = re.search(r"^kubectl -n dra-bridge describe configmap dra-bridge-policy", RUNBOOK, re.M)[0]
    wait_for(lambda: "defaults.mode" in shell(plane, describe, tmp_path).stdout, 30, "PolicyRejected on the ConfigMap")
    # The fix: the enforce policy pushed again (now judged), taken at the next reload.
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"namespaces": [{"names": ["team-a"], "mode": "enforce"}]}))
    fixed = shell(plane, push, tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    mount_policy(plane, policy_file)
    wait_for(lambda: "rejected" not in readyz(), 30, "the fixed policy taken")
    assert readyz()["digest"] == enforced
    # Issue 56: deleting the policy is refused; annotated on purpose it goes, and the rules stay.
    delete = "kubectl -n dra-bridge delete configmap dra-bridge-policy"
    refused = shell(plane, delete, tmp_path)
    assert refused.returncode != 0 and "dra-bridge.io/allow-delete=true" in refused.stderr, refused.stderr
    gone = shell(plane, "kubectl -n dra-bridge annotate configmap dra-bridge-policy dra-bridge.io/allow-delete=true\n"
                        + delete, tmp_path)
    assert gone.returncode == 0 and "keep enforcing the last policy" in gone.stderr, gone.stderr
    mount_policy(plane, policy_file)
    wait_for(lambda: "deleted" in readyz().get("rejected", ""), 30, "the deletion said on /readyz")
    assert readyz()["digest"] == enforced and claim_apply(plane, "--dry-run=server").returncode != 0
    again = shell(plane, push, tmp_path)  # written again: taken as any change
    assert again.returncode == 0, again.stderr
    mount_policy(plane, policy_file)
    wait_for(lambda: "rejected" not in readyz(), 30, "the policy written again")


def resource_versions(plane, tmp_path) -> dict:
    """Each object of the overlay and its resourceVersion, as the server holds it now."""
    listed = shell(plane, "kubectl get -k ~/dra-bridge-deploy -o json", tmp_path)
    assert listed.returncode == 0, listed.stderr
    return {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for o in json.loads(listed.stdout)["items"]}


def _lifecycle(plane, webhook, overlay, policy_file, tmp_path):
    routed = shell(plane, "kubectl apply -k ~/dra-bridge-deploy", tmp_path)
    assert routed.returncode == 0, routed.stderr
    # GitOps: applying the same overlay again changes nothing, and kubectl diff says so (Argo CD
    # and Flux would otherwise show it out of sync for ever).
    versions = resource_versions(plane, tmp_path)
    again = shell(plane, "kubectl apply -k ~/dra-bridge-deploy", tmp_path)
    changed = [line for line in again.stdout.splitlines() if not line.endswith(" unchanged")]
    # kubectl's client-side apply always sends a field whose patch strategy is replace (a
    # PodDisruptionBudget's selector) and says "configured"; the server writes nothing.
    assert again.returncode == 0 and changed in ([], ["poddisruptionbudget.policy/dra-bridge configured"]), \
        again.stdout + again.stderr
    assert resource_versions(plane, tmp_path) == versions  # nothing written
    diff = shell(plane, "kubectl diff -k ~/dra-bridge-deploy || test $? -eq 0", tmp_path)
    assert diff.returncode == 0 and not diff.stdout, diff.stdout + diff.stderr
    image = plane.json("deployment", "dra-bridge", "-n", "dra-bridge")["spec"]["template"]["spec"]["containers"][0]
    assert image["image"] == "registry.example.com/dra-bridge:0.1.0"
    plane.apply(NVIDIA_CLASSES + [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-h100-0"}},
                                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}])
    published = run_reporter(plane, "gpu-h100-0", "h100x8.yaml", reporter_kubeconfig(plane, "gpu-h100-0"))
    assert published.returncode == 0, published.stderr
    webhook.start()
    # Warn (the bundled default until the admin writes a policy): admitted, the request named.
    opted = shell(plane, "kubectl label namespace team-a dra-bridge.io/migrate=enabled", tmp_path)
    assert opted.returncode == 0, opted.stderr
    wait_for(lambda: rewritten(plane), 30, "team-a's GPU pod rewritten")
    warned = claim_apply(plane, "--dry-run=server")
    assert warned.returncode == 0 and "Warning:" in warned.stderr and "gpus" in warned.stderr, warned.stderr
    # Enforce: the documented commands; the kubelet mounts it; the same claim is denied.
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"namespaces": [{"names": ["team-a"], "mode": "enforce"}]}))
    enforce = shell(plane, "kubectl -n dra-bridge create configmap dra-bridge-policy --from-file=policy.yaml "
                           "--dry-run=client -o yaml | kubectl apply -f -", tmp_path)
    assert enforce.returncode == 0, enforce.stderr
    mount_policy(plane, policy_file)
    wait_for(lambda: claim_apply(plane, "--dry-run=server").returncode != 0, 30, "the claim denied")
    denied = claim_apply(plane)
    assert denied.returncode != 0 and "gpus" in denied.stderr, denied.stderr
    # Afterwards a policy that does not load is still refused at apply time, the field named.
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"defaults": {"mode": "enforcee"}}))
    bad = shell(plane, "kubectl -n dra-bridge create configmap dra-bridge-policy --from-file=policy.yaml "
                       "--dry-run=client -o yaml | kubectl apply -f -", tmp_path)
    assert bad.returncode != 0 and "defaults.mode" in bad.stderr, bad.stderr
    enforced = plane.json("configmap", "dra-bridge-policy", "-n", "dra-bridge")["data"]["policy.yaml"]
    assert yaml.safe_load(enforced)["namespaces"][0]["mode"] == "enforce"
    _bad_push_while_down_then_restart(plane, webhook, policy_file, tmp_path)
    # Rollback, as written: no pod is rewritten; validation goes on.
    rolled = shell(plane, runbook_block("## Rollback"), tmp_path)
    assert rolled.returncode == 0, rolled.stderr
    assert not rewritten(plane)
    assert claim_apply(plane, "--dry-run=server").returncode != 0
    # Restored by applying the overlay again (and opting the namespace back in).
    restored = shell(plane, "kubectl apply -k ~/dra-bridge-deploy\n"
                            "kubectl label namespace team-a dra-bridge.io/migrate=enabled", tmp_path)
    assert restored.returncode == 0, restored.stderr
    wait_for(lambda: rewritten(plane), 30, "team-a's GPU pod rewritten again")
    # Compiled policies, as serve --admission-policies=sync writes them; the rollout binding.
    compiled = subprocess.run([sys.executable, "-m", "app", "policy", "compile", "--policy", str(ROOT / "examples" /
                               "policies" / "admin-access-one-namespace" / "policy.yaml")],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert compiled.returncode == 0 and compiled.stdout, compiled.stderr
    plane.kubectl("apply", "-f", "-", input=compiled.stdout)
    bound = shell(plane, "kubectl create clusterrolebinding dra-bridge-rollout-$USER --clusterrole=dra-bridge-rollout "
                         "--user=$USER", tmp_path)
    assert bound.returncode == 0, bound.stderr
    # Upgrade: a new image in the overlay, applied as documented; the admin's policy is kept.
    doc = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    doc["images"][0]["newTag"] = "0.2.0"
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    upgraded = shell(plane, runbook_block("## Upgrade").splitlines()[0], tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    running = plane.json("deployment", "dra-bridge", "-n", "dra-bridge")["spec"]["template"]["spec"]["containers"][0]
    assert running["image"] == "registry.example.com/dra-bridge:0.2.0"
    kept = plane.json("configmap", "dra-bridge-policy", "-n", "dra-bridge")["data"]["policy.yaml"]
    assert kept == enforced
    assert claim_apply(plane, "--dry-run=server").returncode != 0
    # Uninstall, as written, twice: exit 0, nothing of ours left.
    block = runbook_block("## Uninstall")
    assert "--ignore-not-found" in block
    with kubelet_finishing_pods(plane):
        for attempt in ("first", "second"):
            done = shell(plane, block, tmp_path)
            assert done.returncode == 0, (attempt, done.stderr)
        wait_for(lambda: plane.kubectl("get", "namespace", "dra-bridge", check=False).returncode != 0, 120,
                 "the dra-bridge namespace gone")
    assert not plane.json("validatingadmissionpolicies", "-l", OURS)["items"]
    assert plane.kubectl("get", "mutatingwebhookconfiguration", "dra-bridge", check=False).returncode != 0
    assert plane.kubectl("get", "validatingwebhookconfiguration", "dra-bridge", check=False).returncode != 0
    assert not [b for b in plane.json("clusterrolebindings")["items"]
                if b["metadata"]["name"].startswith("dra-bridge")]
    assert not [r for r in plane.json("clusterroles")["items"] if r["metadata"]["name"].startswith("dra-bridge")]
    assert not plane.json("resourceslices", "-l", OURS)["items"]
