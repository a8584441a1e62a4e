"""NVIDIA's demo claims are accepted by /validate's checks against slices our reporter renders."""

import pytest
import yaml

from app import dra
from app.cli import load_inventory
from app.common import read_objects
from app.dra import Inventory
from app.policy import parse_policy
from app.reporter import SHADOW_DRIVER, node_from_description, render
from app import application
from tests.conftest import ROOT

POLICY = parse_policy("defaults:\n  mode: enforce\n")
SETTINGS = POLICY.for_namespace("gpu-test", {})


def rendered(*descriptions, shadow=False):
    """The index of our reporter's slices; shadow: as its shadow mode publishes them (another
    driver, NVIDIA's names qualified, the shadow-of label), which the validator maps back."""
    slices = []
    for node, path in descriptions:
        desc = node_from_description(yaml.safe_load(path.read_text()), path.name)
        if shadow:
            slices += render.slices(desc, node, SHADOW_DRIVER, 1, qualify=True, shadow_of="gpu.nvidia.com")
        else:
            slices += render.slices(desc, node, "gpu.nvidia.com", 1)
    return dra.build_index(Inventory(slices=slices, classes=load_inventory(None).classes))


FAKE = ROOT / "app" / "data" / "fake"
H100_AND_MIG = [("h100", FAKE / "h100x8.yaml"), ("a100", FAKE / "a100-mig.yaml")]
A100_40_MIG = [("a100-40", ROOT / "tests" / "data" / "a100-40gb-mig.yaml")]


@pytest.mark.parametrize("filename, nodes", [
    ("nvidia-dra-gpu-test1-v1.yaml", H100_AND_MIG),
    ("nvidia-dra-gpu-test5-ts-mps.yaml", H100_AND_MIG),
    ("nvidia-dra-bats-gpu-simple-mig-ts.yaml", H100_AND_MIG),
    ("nvidia-dra-bats-two-claims-one-pod.yaml", H100_AND_MIG),
    ("nvidia-dra-gpu-test4-mig-matchattr.yaml", A100_40_MIG),  # its profiles exist on A100 40GB only
])
@pytest.mark.parametrize("shadow", [False, True], ids=["publish", "shadow"])
def test_nvidia_demo_claims_are_accepted(corpus, filename, nodes, shadow):
    ix = rendered(*nodes, shadow=shadow)
    objects = [o for _l, o in read_objects(str(corpus / "dra-claims" / filename))
               if o.get("kind") in ("ResourceClaim", "ResourceClaimTemplate")]
    assert objects
    for obj in objects:
        outcome = application.evaluate_claim(obj, POLICY, SETTINGS, ix)
        assert outcome.violations == [], f"{filename}: {outcome.violations}"
        assert outcome.verdict.status == "satisfiable"


def test_nvidia_demo_reading_index_fails_as_it_would_on_nvidias_own_slices(corpus):
    """gpu-test6 selects `device.attributes['gpu.nvidia.com'].index`; NVIDIA's driver (v0.5.0-dev)
    publishes no `index` (we keep it as dra-bridge.io/index): the scheduler's CEL lookup fails."""
    ix = rendered(*H100_AND_MIG)
    [obj] = [o for _l, o in read_objects(str(corpus / "dra-claims" / "nvidia-dra-gpu-test6-cel-a100.yaml"))
             if o.get("kind") in ("ResourceClaim", "ResourceClaimTemplate")]
    outcome = application.evaluate_claim(obj, POLICY, SETTINGS, ix)
    assert outcome.verdict.status == "invalid" and "no such key: index" in outcome.verdict.message
