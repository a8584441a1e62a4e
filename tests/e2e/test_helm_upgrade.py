"""Issue 55, Helm on a real control plane with the real `helm` (tests/helm): an upgrade from the
previous chart revision with --reuse-values and --reset-then-reuse-values (values that revision
lacked are filled from this chart's), the policy ConfigMap with one writer (after the documented
`kubectl apply` edit, upgrades keep the admin's policy and never conflict), rollback, and an
uninstall that can run twice."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import own_plane
from tests.helm import helmbin
from tests.helm.conftest import helm  # noqa: F401 - the fixture: helm built from its module, or a skip

pytestmark = pytest.mark.timeout(900)
# The chart as this session found it (before monitoring.podMonitor existed): "the previous chart".
PREVIOUS = "b96206a"
IMAGE = ("--set", "image.repository=registry.example.com/dra-bridge")


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "helm") as cluster:
        yield cluster


def run(plane, *args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": plane.admin_kubeconfig, "PATH": f"{plane.bin}:{os.environ['PATH']}"}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=180, cwd=cwd)


def previous_chart(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"]).returncode != 0:
        pytest.skip(f"commit {PREVIOUS} (the previous chart) is not in this clone (shallow?): fetch the history")
    subprocess.run(f"git -C {ROOT} archive {PREVIOUS} charts/dra-bridge manifests/monitoring | tar -x -C {tmp_path}",
                   shell=True, check=True)
    return tmp_path / "charts" / "dra-bridge"


def test_an_upgrade_from_the_previous_chart_reuses_its_values(plane, helm, tmp_path):
    old = previous_chart(tmp_path)
    installed = run(plane, str(helm), "install", "old", str(old), "-n", "helm-old", "--create-namespace", *IMAGE)
    assert installed.returncode == 0, installed.stderr
    for flag in ("--reuse-values", "--reset-then-reuse-values"):
        upgraded = run(plane, str(helm), "upgrade", "old", str(helmbin.CHART), "-n", "helm-old", flag)
        assert upgraded.returncode == 0, (flag, upgraded.stderr)
    history = run(plane, str(helm), "history", "old", "-n", "helm-old")
    assert history.stdout.count("superseded") == 2 and "deployed" in history.stdout, history.stdout
    assert run(plane, str(helm), "uninstall", "old", "-n", "helm-old").returncode == 0


def test_the_policy_has_one_writer_and_the_uninstall_runs_twice(plane, helm, tmp_path):
    (tmp_path / "values.yaml").write_text("policy:\n  defaults:\n    mode: warn\n")
    installed = run(plane, str(helm), "install", "dra-bridge", str(helmbin.CHART), "-n", "dra-bridge",
                    "--create-namespace", *IMAGE, "-f", str(tmp_path / "values.yaml"))
    assert installed.returncode == 0, installed.stderr
    # docs/operations.md's edit, as an admin runs it.
    (tmp_path / "policy.yaml").write_text("defaults:\n  mode: enforce\n")
    edited = run(plane, "bash", "-c", "kubectl -n dra-bridge create configmap dra-bridge-policy "
                 "--from-file=policy.yaml --dry-run=client -o yaml | kubectl apply -f -", cwd=tmp_path)
    assert edited.returncode == 0, edited.stderr

    def policy() -> str:
        return run(plane, "kubectl", "-n", "dra-bridge", "get", "configmap", "dra-bridge-policy", "-o",
                   "jsonpath={.data.policy\\.yaml}").stdout

    upgraded = run(plane, str(helm), "upgrade", "dra-bridge", str(helmbin.CHART), "-n", "dra-bridge", "--reuse-values")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "mode: enforce" in policy()  # the admin's edit, not the value the release was installed with
    assert run(plane, str(helm), "rollback", "dra-bridge", "2", "-n", "dra-bridge").returncode == 0
    assert "mode: enforce" in policy()
    # Back to before the edit: Helm would write revision 1's policy over the admin's, and refuses.
    back = run(plane, str(helm), "rollback", "dra-bridge", "1", "-n", "dra-bridge")
    assert back.returncode != 0 and "conflict" in back.stderr and "mode: enforce" in policy(), back.stderr
    for _ in range(2):
        gone = run(plane, str(helm), "uninstall", "dra-bridge", "-n", "dra-bridge", "--ignore-not-found")
        assert gone.returncode == 0, gone.stderr
    assert "mode: enforce" in policy()  # helm.sh/resource-policy: keep, as docs/operations.md says
