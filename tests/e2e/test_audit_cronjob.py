"""Issue 55 on a real control plane: the shipped background scan. The CronJob's service account,
with exactly the RBAC manifests/audit grants, runs the CronJob's command; it writes every audited
namespace's PolicyReport (Kyverno's CRDs), replaces a report that became clean, says what is
missing where the CRDs are not installed, and the CronJob itself is accepted by the API server."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.cluster import kubeconfig
from tests.e2e.conftest import own_plane, wait_for
from tests.e2e.policyreport_crds import crds

pytestmark = pytest.mark.timeout(1800)
GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": "team-x"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "audit-cronjob") as started:
        yield started


def audit_objects(tmp_path) -> list[dict]:
    from app.cli import main
    from tests.contract.test_manifests import kustomize

    out = tmp_path / "overlay"
    assert main(["certs", "--out", str(out), "--inject", str(ROOT / "manifests"), "--image",
                 "registry.example/dra-bridge:e2e", "--audit-cronjob"]) == 0
    return [d for d in yaml.safe_load_all(kustomize(out)) if d and d["metadata"]["name"] == "dra-bridge-audit"]


def test_the_cronjobs_command_writes_every_report_with_its_own_rbac(plane, tmp_path):
    objects = audit_objects(tmp_path)
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
                 for n, labels in (("dra-bridge", {}), ("team-x", {"dra-bridge.io/migrate": "enabled"}),
                                   ("clean", {}))])
    plane.apply([d for d in objects if d["kind"] != "CronJob"])
    [cronjob] = [d for d in objects if d["kind"] == "CronJob"]
    plane.apply([cronjob], "--dry-run=server")  # the API server takes the CronJob as shipped
    config = kubeconfig(tmp_path / "audit.kubeconfig", plane.server, plane.ca,
                        plane.token("dra-bridge-audit", "dra-bridge"))
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]

    def scan() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "app", *args, "--kubeconfig", config], capture_output=True,
                              text=True, timeout=300, cwd=ROOT)

    missing = scan()
    assert missing.returncode == 3 and "PolicyReport CRDs" in missing.stderr and "Kyverno" in missing.stderr, \
        missing.stderr
    plane.apply(crds())
    for crd in ("policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"):
        plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    plane.apply([GPU_POD])
    first = scan()
    assert first.returncode == 0, first.stderr  # findings are in the reports: the run itself succeeded
    assert "wrote PolicyReport team-x/" in first.stdout and "wrote PolicyReport clean/" in first.stdout, first.stdout
    assert "policy in force: the bundled default" in first.stderr

    def results(namespace: str) -> list[dict]:
        [report] = plane.json("policyreports", "-n", namespace)["items"]
        return report.get("results") or []

    assert [r["resources"][0]["name"] for r in results("team-x")] == ["notebook"]
    assert results("clean") == []
    plane.kubectl("delete", "pod", "notebook", "-n", "team-x", "--wait=false", "--grace-period=0", "--force")
    wait_for(lambda: not plane.json("pods", "-n", "team-x")["items"], what="the pod gone")
    again = scan()
    assert again.returncode == 0, again.stderr
    assert results("team-x") == []  # the report that became clean is replaced, not left failing
