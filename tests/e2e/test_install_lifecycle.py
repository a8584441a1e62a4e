"""Issue 46 on a control plane of its own: the documented install, the admin's policy written with
the documented command, an upgrade (the base applied again) that keeps it, and the documented
uninstall (docs/operations.md, run as written) that exits 0, again when run twice, and leaves
nothing of ours behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import own_plane, wait_for

pytestmark = pytest.mark.timeout(600)
RUNBOOK = (ROOT / "docs" / "operations.md").read_text()
OURS = "app.kubernetes.io/managed-by=dra-bridge"


def uninstall_block() -> str:
    section = RUNBOOK[RUNBOOK.index("## Uninstall"):]
    return re.search(r"```sh\n(.*?)```", section, re.S)[1]


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "lifecycle") as cluster:
        yield cluster


def shell(plane, script: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": plane.admin_kubeconfig, "PATH": f"{plane.bin}:{os.environ['PATH']}",
           "HOME": str(tmp_path), "USER": "admin-anna"}
    return subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, env=env, timeout=240,
                          cwd=tmp_path)


def test_install_upgrade_keeps_the_policy_and_uninstall_leaves_nothing(plane, tmp_path):
    (tmp_path / "dra-bridge-deploy").symlink_to(ROOT / "manifests")  # the runbook's overlay folder
    installed = shell(plane, "kubectl apply -k ~/dra-bridge-deploy", tmp_path)
    assert installed.returncode == 0, installed.stderr
    # The admin's policy, with the documented command; then the rollout binding docs/rollout.md names.
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"defaults": {"mode": "enforce"}}))
    written = shell(plane, "kubectl -n dra-bridge create configmap dra-bridge-policy --from-file=policy.yaml "
                           "--dry-run=client -o yaml | kubectl apply -f -\n"
                           "kubectl create clusterrolebinding dra-bridge-rollout-$USER --clusterrole=dra-bridge-rollout "
                           "--user=$USER\n", tmp_path)
    assert written.returncode == 0, written.stderr
    # What serve --admission-policies=sync writes: compiled policies with our label.
    compiled = subprocess.run([sys.executable, "-m", "app", "policy", "compile", "--policy", str(ROOT / "examples" /
                               "policies" / "admin-access-one-namespace" / "policy.yaml")],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert compiled.returncode == 0 and compiled.stdout, compiled.stderr
    plane.kubectl("apply", "-f", "-", input=compiled.stdout)
    # Upgrade: the base applied again never puts a default back over the admin's policy.
    again = shell(plane, "kubectl apply -k ~/dra-bridge-deploy", tmp_path)
    assert again.returncode == 0, again.stderr
    kept = plane.json("configmap", "dra-bridge-policy", "-n", "dra-bridge")["data"]["policy.yaml"]
    assert yaml.safe_load(kept) == {"defaults": {"mode": "enforce"}}
    # The documented uninstall, as written, twice.
    block = uninstall_block()
    assert "--ignore-not-found" in block
    for attempt in ("first", "second"):
        done = shell(plane, block, tmp_path)
        assert done.returncode == 0, (attempt, done.stderr)
    assert not plane.json("validatingadmissionpolicies", "-l", OURS)["items"]
    assert plane.kubectl("get", "mutatingwebhookconfiguration", "dra-bridge", check=False).returncode != 0
    assert not [b for b in plane.json("clusterrolebindings")["items"]
                if b["metadata"]["name"].startswith("dra-bridge")]
    assert not [r for r in plane.json("clusterroles")["items"] if r["metadata"]["name"].startswith("dra-bridge")]
    wait_for(lambda: plane.kubectl("get", "namespace", "dra-bridge", check=False).returncode != 0, 120,
             "the dra-bridge namespace gone")
