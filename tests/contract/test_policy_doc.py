"""docs/policy.md's five admin policies are the ones in examples/policies, and each passes its
PolicyTest through `dra-bridge policy test` (the webhooks' own chain); a test that expects the
wrong outcome fails it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

GUIDE = (ROOT / "docs" / "policy.md").read_text()
EXAMPLES = ROOT / "examples" / "policies"
BLOCKS = dict((m[1], m[2]) for m in re.finditer(r"```yaml\n# (examples/policies/[\w-]+/policy\.yaml)\n(.*?)```",
                                                  GUIDE, re.DOTALL))


def policy_test(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "policy", "test", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_guide_shows_five_policies_each_as_shipped():
    assert len(BLOCKS) == 5 and len(list(EXAMPLES.iterdir())) == 5
    for path, shown in BLOCKS.items():
        shipped = yaml.safe_load((ROOT / path).read_text())
        assert shipped == yaml.safe_load(shown), path


def test_every_example_policy_passes_its_test():
    result = policy_test(str(EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "20 of 20 result(s) as expected" in result.stdout
    assert result.stdout.count("PASS") == 20


def test_a_wrong_expectation_fails_with_what_was_got(tmp_path):
    shutil.copytree(EXAMPLES / "max-gpus-per-pod", tmp_path / "case")
    test = tmp_path / "case" / "test.yaml"
    test.write_text(test.read_text().replace("name: eight-legacy, namespace: team-a, result: deny",
                                             "name: eight-legacy, namespace: team-a, result: warn"))
    result = policy_test(str(test))
    assert result.returncode == 1
    assert "FAIL Pod team-a/eight-legacy (as policy-test): expected warn by team-a-max-4-gpus-per-pod, got deny (rules: " \
        "team-a-max-4-gpus-per-pod)" in result.stdout
    assert "8 devices" in result.stdout  # the denial itself, to see why


@pytest.mark.parametrize("edit, said", [
    (("result: deny", "result: refuse"), "results[0].result: 'refuse': one of allow, audit, warn, deny"),
    (("name: eight-legacy, namespace: team-a", "name: nine, namespace: team-a"), "0 resources are Pod nine"),
    (("policy: policy.yaml", "policy: missing.yaml"), "missing.yaml: cannot read"),
    # A misspelt field never silently skips a check or uses a default (issue 45).
    (("result: deny, rules:", "result: deny, rewriten: true, rules:"),
     "results[0]: rewriten: unknown field (did you mean 'rewritten'?"),
    (("policy: policy.yaml", "policy: policy.yaml\ninventroy: inventory.yaml"),
     "test.yaml: inventroy: unknown field (did you mean 'inventory'?"),
])
def test_bad_test_files_are_exit_2_naming_the_field(tmp_path, edit, said):
    shutil.copytree(EXAMPLES / "max-gpus-per-pod", tmp_path / "case")
    test = tmp_path / "case" / "test.yaml"
    test.write_text(test.read_text().replace(*edit, 1))
    result = policy_test(str(test))
    assert result.returncode == 2 and said in result.stderr, result.stderr


def test_check_with_a_policy_judges_claims_and_pods_by_its_rules(tmp_path):
    objects = tmp_path / "objects.yaml"
    objects.write_text((EXAMPLES / "max-gpus-per-pod" / "resources.yaml").read_text())
    policy = str(EXAMPLES / "max-gpus-per-pod" / "policy.yaml")
    judged = subprocess.run([sys.executable, "-m", "app", "check", "-f", str(objects), "--policy", policy, "-o",
                             "json", "--inventory", "example"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert judged.returncode == 1, judged.stderr
    rows = {(r["kind"], r["name"], r["source"].rsplit(":", 1)[1]): r["policy"] for r in yaml.safe_load(judged.stdout)}
    assert sorted(rows.values()) == ["allow", "allow", "allow", "allow", "deny", "deny"]
    assert rows[("Pod", "two-claims", "33")] == "deny" and rows[("Pod", "two-legacy", "8")] == "allow"
    plain = subprocess.run([sys.executable, "-m", "app", "check", "-f", str(objects), "--inventory", "example"],
                           cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 0 and "Pod/" not in plain.stdout
