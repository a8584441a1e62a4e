"""Every DRA claim object in the corpus, against the realistic test inventory (tests/inventory.py).

Each expectation says why, as the scheduler would decide it.
"""

import pytest

from app import dra
from app.common import read_objects
from tests.unit.device_inventory import build_index

EXPECTED = {
    # file, line of the object: (verdict, why)
    ("draex-admin-access.yaml", 10): ("satisfiable", "All gpu.example.com devices with adminAccess on the example worker"),
    ("draex-allow-multiple-allocations.yaml", 12): ("never", "asks for compute capacity, which the README's slices "
                                                             "do not publish (gpuAllowMultipleAllocations=false)"),
    ("draex-allow-multiple-allocations.yaml", 29): ("never", "same, second claim"),
    ("draex-initcontainer-shared-gpu.yaml", 10): ("satisfiable", "one example GPU shared by two containers"),
    ("draex-opaque-config-ts-sp.yaml", 10): ("satisfiable", "two example GPUs; opaque config does not affect allocation"),
    ("draex-prioritized-alternatives.yaml", 52): ("satisfiable", "falls through to older-gpu: no BLEEDING-EDGE model, no 1Ti"),
    ("draex-prioritized-alternatives.yaml", 79): ("satisfiable", "latest-gpu matches LATEST-GPU-MODEL"),
    ("gke-ccc-dra-allgpus-v1beta1.yaml", 15): ("satisfiable", "v1beta1 converted; All GPUs of a node"),
    ("k8sweb-resourceclaimtemplate.yaml", 1): ("never", "no DeviceClass example-device-class here: the "
                                                            "scheduler's PreFilter keeps the pod Unschedulable"),
    ("nvidia-dra-bats-gpu-simple-mig-ts.yaml", 1): ("satisfiable", "MIG with multiprocessors > 10 (A100 MIG devices have 14+)"),
    ("nvidia-dra-bats-two-claims-one-pod.yaml", 1): ("satisfiable", "one whole GPU"),
    ("nvidia-dra-bats-two-claims-one-pod.yaml", 15): ("satisfiable", "one whole GPU"),
    ("nvidia-dra-gpu-test1-v1.yaml", 11): ("satisfiable", "one whole GPU"),
    ("nvidia-dra-gpu-test1-v1beta1.yaml", 11): ("satisfiable", "one whole GPU, v1beta1 shape"),
    ("nvidia-dra-gpu-test4-mig-matchattr.yaml", 12): (
        "satisfiable", "1g.5gb x2 + 2g.10gb + 3g.20gb on one parent GPU: only GPU 0 of gpu-a100-40-0"),
    ("nvidia-dra-gpu-test5-ts-mps.yaml", 11): ("satisfiable", "two whole GPUs on one node"),
    # NVIDIA's demo still reads `index`, which its driver no longer publishes (v0.5.0-dev
    # deviceinfo.go): on a whole A100 the lookup fails and the scheduler stops with a CEL error.
    ("nvidia-dra-gpu-test6-cel-a100.yaml", 12): ("invalid", "reads index, an attribute NVIDIA no longer publishes"),
    ("vks-allocated-resourceclaim-list.yaml", 3): ("satisfiable", "one whole GPU"),
}
INVALID = {
    ("k8sapi-testdata-v1-resourceclaim.yaml", 1): "allocationMode",  # fuzzer placeholder value
    ("k8sweb-resourceclaim-allmode.yaml", 1): "selectors[0].cel.expression",  # docs bug: expression not under cel
}


def claims(corpus):
    out = {}
    for path in sorted((corpus / "dra-claims").glob("*.yaml")):
        for line, obj in read_objects(str(path)):
            if obj.get("kind") in dra.CLAIM_KINDS:
                out[(path.name, line)] = dra.claim_spec(obj)[0]
    return out


@pytest.fixture(scope="module")
def index():
    return build_index()


def test_every_claim_object_has_an_expectation(corpus):
    assert set(claims(corpus)) == set(EXPECTED) | set(INVALID)


def test_claims_get_the_schedulers_verdict(corpus, index):
    for key, spec in claims(corpus).items():
        if key in INVALID:
            with pytest.raises(dra.ClaimError, match=INVALID[key].replace("[", r"\[").replace("]", r"\]")):
                dra.parse_claim_spec(spec)
            continue
        verdict = dra.check(dra.parse_claim_spec(spec), index)
        expected, why = EXPECTED[key]
        assert verdict.status == expected, f"{key}: {why}; got {verdict.status}: {verdict.message}"
        assert not verdict.errors, f"{key}: {verdict.errors}"


def test_mig_match_attribute_pins_the_right_node(corpus, index):
    spec = claims(corpus)[("nvidia-dra-gpu-test4-mig-matchattr.yaml", 12)]
    verdict = dra.check(dra.parse_claim_spec(spec), index)
    assert (verdict.nodes, verdict.example_node) == (1, "gpu-a100-40-0")
