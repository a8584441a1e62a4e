"""Our example manifests (examples/, used by the README): valid objects, and each one does what
the README says it shows."""

import re

import kubernetes_validate
import pytest

from app import dra
from app.cli import load_inventory, read_inputs
from app.migration import plan_pod, pod_templates
from app.policy import default_policy
from app.server import admission
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
K8S_VERSION = "1.34.0"
RULES = default_policy().migration
# What the example inventory (the bundled default) says of each claim.
CLAIM_VERDICTS = {"one-gpu.yaml": "satisfiable", "a100-gpu.yaml": "satisfiable",
                  "four-mig-1g5gb-same-gpu.yaml": "never"}


def objects(folder):
    return [(source, obj) for source, objs in read_inputs([str(EXAMPLES / folder)]) for _line, obj in objs]


@pytest.mark.parametrize("source, obj", [pytest.param(s, o, id=s.rsplit("/", 1)[-1]) for s, o in objects("workloads")])
def test_workload_is_valid_and_migrates(source, obj):
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    templates = list(pod_templates(obj))
    assert templates, source
    for _where, holder in templates:
        plan = plan_pod(holder, RULES, "team-a")
        assert plan.status == "migrated", (source, plan.reason)
        for template in plan.templates:
            kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def test_claims_are_valid_and_judged_as_documented():
    index = dra.build_index(load_inventory(None))
    seen = {}
    for source, obj in objects("claims"):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        seen[source.rsplit("/", 1)[-1]] = dra.check(dra.parse_claim_object(obj), index).status
    assert seen == CLAIM_VERDICTS


def test_reviews_parse_and_differ_only_in_dry_run():
    import json

    real = json.loads((EXAMPLES / "reviews" / "pod-review.json").read_text())
    dry = json.loads((EXAMPLES / "reviews" / "pod-review-dry.json").read_text())
    assert not admission.parse_review(json.dumps(real).encode()).dry_run
    assert admission.parse_review(json.dumps(dry).encode()).dry_run
    del dry["request"]["dryRun"]
    assert dry == real


def test_every_file_the_readme_names_exists():
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    named = set(re.findall(r"(?<![\w/.])((?:examples|app|tests|bench|manifests)/[\w./-]*\w)", text))
    assert any(n.startswith("examples/") for n in named)
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, missing
