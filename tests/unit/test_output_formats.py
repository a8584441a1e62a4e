"""Issue 55: `-o wide` was refused by plan, check and quota. Every command that prints rows takes
-o table and -o wide (kubectl's: the same rows, uncut), run here as the CLI's real process."""

import subprocess
import sys

import yaml

from tests.conftest import ROOT


def run(*args):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_plan_table_and_wide_print_the_summary_on_stdout_and_wide_cuts_nothing():
    table = run("plan", "-f", "examples/workloads", "-o", "table", "--inventory", "example")
    wide = run("plan", "-f", "examples/workloads", "-o", "wide", "--inventory", "example")
    for result in (table, wide):
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("STATUS") and "summary: migrated" in result.stdout
        assert "apiVersion" not in result.stdout and "STATUS" not in result.stderr  # the table alone, once
    cut = [line for line in table.stdout.splitlines() if " ...  [" in line]
    assert cut and not [line for line in wide.stdout.splitlines() if " ...  [" in line]
    assert len(wide.stdout) > len(table.stdout)


def test_check_wide_prints_policy_messages_whole(tmp_path):
    policy = tmp_path / "policy.yaml"
    said = "team-a claims take one GPU: " + "ask the platform team for more " * 20
    policy.write_text(yaml.safe_dump({"rules": [{"name": "one", "validationActions": ["Deny"], "message": said,
                                                 "maxDevicesPerClaim": 1}]}))
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                     "metadata": {"name": "two", "namespace": "team-a"},
                                     "spec": {"devices": {"requests": [{"name": "g", "exactly": {
                                         "deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}))
    args = ("check", "-f", str(claim), "--inventory", "example", "--policy", str(policy))
    table, wide = run(*args, "-o", "table"), run(*args, "-o", "wide")
    assert table.returncode == wide.returncode == 1, wide.stderr  # denied by the rule
    assert said.strip() not in table.stdout and " ..." in table.stdout
    assert said.strip() in wide.stdout


def test_quota_table_has_one_row_per_object_and_wide_keeps_every_note():
    table = run("quota", "-f", "examples/quota", "-o", "table")
    wide = run("quota", "-f", "examples/quota", "-o", "wide")
    assert table.returncode == wide.returncode == 1, table.stderr
    rows = table.stdout.splitlines()
    assert rows[0].split() == ["OBJECT", "CHANGE", "DETAIL"]
    [quota] = [r for r in rows if r.startswith("ResourceQuota/team-a/gpus")]
    assert "adds gpu.nvidia.com.deviceclass.resource.k8s.io/devices=4" in quota and quota.endswith("...")
    [whole] = [r for r in wide.stdout.splitlines() if r.startswith("ResourceQuota/team-a/gpus")]
    assert "one budget)" in whole and not whole.endswith("...")
    assert any(r.startswith("Configuration/kueue-manager-config") for r in rows)
