"""Every legacy and HAMi workload in the shared corpus goes through /mutate's planner."""

import base64
import copy
import re

import kubernetes_validate
import orjson
import pytest

from app.common import read_objects
from app.migration import (MAX_DEVICES_PER_CLAIM, MAX_REQUESTS, apply_patch, legacy_resources, plan_pod,
                           pod_templates)
from app.policy import default_policy
from app.application import planning
from app.server import admission, mutation
from tests.conftest import CORPUS, CORPUS_ABSENT
from tests.helpers import review, template_requests

K8S_VERSION = "1.34.0"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Every corpus pod through the planner: path rewrite, shares at a whole GPU's cost where no device
# here shares (the path choice, schedulers and share costs included, is tested elsewhere).
POLICY = default_policy().model_copy(update={"migration": default_policy().migration.model_copy(
    update={"path": "rewrite", "fractional": "wholeDevice"})})
# Pods that ask for no NVIDIA GPU at all, or only through scheduler annotations (KAI fractions).
NOT_GPU_RESOURCES = {"amd-rocm-vllm-deployment.yaml", "intel-gpu-pytorch-pod-i915.yaml",
                     "nvdp-static-daemonset-negative.yaml", "gpuop-validator-initcontainer-placeholder.yaml",
                     "kai-gpu-fraction-init-container.yaml", "kai-gpu-fraction-non-default-container.yaml",
                     "kai-gpu-memory-pod.yaml", "kuberay-raycluster-kai-gpu-fraction.yaml"}


def _cases():
    if not CORPUS.is_dir():
        return [pytest.param(None, None, None, None, marks=pytest.mark.skip(reason=CORPUS_ABSENT), id="no-corpus")]
    cases = []
    for folder in ("legacy", "hami"):
        for path in sorted((CORPUS / folder).glob("*.yaml")):
            for line, obj in read_objects(str(path)):
                for where, holder in pod_templates(obj):
                    cases.append(pytest.param(path.name, obj, where, holder, id=f"{path.name}:{line}:{where or 'pod'}"))
    return cases


def _as_pod(holder: dict, fallback_name: str) -> dict:
    meta = copy.deepcopy(holder.get("metadata") or {})
    meta.pop("namespace", None)  # placeholders such as FILLED_BY_VALIDATOR; the request says where
    if not meta.get("name") and not meta.get("generateName"):
        meta["name"] = fallback_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(holder["spec"])}


def _validate(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_corpus_is_present_and_has_gpu_workloads(corpus):
    assert len(_cases()) >= 40


@pytest.mark.parametrize("filename, obj, where, holder", _cases())
def test_corpus_workload_migrates_cleanly(filename, obj, where, holder):
    pod = _as_pod(holder, "corpus-pod")
    req = admission.parse_review(orjson.dumps(review(pod, namespace="team-a")))
    mp = mutation.plan_request(req, POLICY, {})
    resp = mutation.respond(req, mp)["response"]
    assert resp["allowed"] is True
    assert resp["uid"] == "uid-1"

    if not legacy_resources(pod["spec"], POLICY.migration):
        assert filename in NOT_GPU_RESOURCES or where, f"{filename} unexpectedly has no GPU request"
        assert "patch" not in resp
        return
    assert filename not in NOT_GPU_RESOURCES
    assert mp.plan.status == "migrated", mp.plan.reason
    migrated = apply_patch(pod, base64.b64decode(resp["patch"]))
    # The patch is computed on the planner's view (spec + annotations); on the whole pod it
    # must change exactly those and leave the rest (name, labels, ...) alone.
    # (Planned on the whole pod: the webhook's view leaves out volumes, which it never changes.)
    whole = plan_pod(planning._planner_input(pod, strip_volumes=False), POLICY.migration, "team-a").pod
    assert migrated["spec"] == whole["spec"]
    assert migrated["metadata"]["annotations"] == whole["metadata"]["annotations"]
    assert {k: v for k, v in migrated["metadata"].items() if k != "annotations"} == \
        {k: v for k, v in pod["metadata"].items() if k != "annotations"}
    assert legacy_resources(migrated["spec"], POLICY.migration) == []
    _validate(migrated)

    requests = []
    for template in mp.plan.templates:
        _validate(template)
        requests = template_requests(template)
        assert 1 <= len(requests) <= MAX_REQUESTS
        assert sum(r["exactly"]["count"] for r in requests) <= MAX_DEVICES_PER_CLAIM
        for r in requests:
            assert DNS_LABEL.match(r["name"])
            assert len(r["exactly"].get("selectors", [])) <= 32
            assert all(len(s["cel"]["expression"]) <= 10 * 1024 for s in r["exactly"].get("selectors", []))
    # Each container references only requests that exist in its template.
    names = {r["name"] for r in requests}
    for list_name in ("initContainers", "containers"):
        for c in migrated["spec"].get(list_name) or []:
            for claim in (c.get("resources") or {}).get("claims", []):
                assert claim["request"] in names


def test_zero_gpu_corpus_pod_gets_no_claim(corpus):
    [(_, obj)] = read_objects(str(corpus / "legacy" / "deepops-zero-gpu-pod.yaml"))
    mp = mutation.plan_request(admission.parse_review(orjson.dumps(review(obj))), POLICY, {})
    assert mp.plan.templates == []
    assert "resourceClaims" not in mp.plan.pod["spec"]


def test_gfd_affinity_corpus_pod_moves_labels_into_cel(corpus):
    [(_, obj)] = read_objects(str(corpus / "legacy" / "deepops-gfd-affinity-family-memory.yaml"))
    mp = mutation.plan_request(admission.parse_review(orjson.dumps(review(obj))), POLICY, {})
    [template] = mp.plan.templates
    exprs = [s["cel"]["expression"] for s in template_requests(template)[0]["exactly"]["selectors"]]
    assert any("architecture.lowerAscii() in ['ampere']" in e for e in exprs)
    assert any("compareTo(quantity('16384Mi')) > 0" in e for e in exprs)
    assert "affinity" not in mp.plan.pod["spec"]


def _inventory_devices():
    from app.cli import load_inventory
    from app import cel

    return [cel.device_variable(s["spec"]["driver"], d) for s in load_inventory(None).slices for d in s["spec"]["devices"]]


def test_every_generated_selector_compiles_and_evaluates_without_error(corpus):
    """Guards make missing attributes a plain 'no match', never a runtime error."""
    from app import cel

    devices = _inventory_devices()
    checked = 0
    for case in _cases():
        _filename, _obj, _where, holder = case.values
        plan = mutation.plan_request(admission.parse_review(orjson.dumps(review(_as_pod(holder, "p")))),
                                     POLICY, {}).plan
        for template in plan.templates:
            for request in template_requests(template):
                for sel in request["exactly"].get("selectors", []):
                    compiled = cel.compile_selector(sel["cel"]["expression"])
                    for device in devices:
                        assert isinstance(compiled.matches(device), bool)
                    checked += 1
    assert checked >= 10
