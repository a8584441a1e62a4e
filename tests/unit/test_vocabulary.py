"""One definition of the Kubernetes words every layer reads (issue 33's vocabulary module)."""

from app.common import NVIDIA_DRIVER, SHADOW_OF, controller_ref, metadata_of
from app.dra import shadow
from app.application.rollout import sides
from app.reporter import render


def test_metadata_of_takes_whatever_an_object_holds():
    assert metadata_of({"metadata": {"name": "a"}}) == {"name": "a"}
    for broken in (None, {}, {"metadata": None}, {"metadata": "x"}, {"metadata": []}, "pod"):
        assert metadata_of(broken) == {}


def test_the_controller_is_the_reference_marked_so():
    refs = [{"kind": "Job", "name": "j"}, {"kind": "ReplicaSet", "name": "rs", "controller": True}]
    assert controller_ref({"metadata": {"ownerReferences": refs}})["name"] == "rs"
    assert controller_ref({"metadata": {"ownerReferences": refs[:1]}}) is None
    assert controller_ref({"metadata": {"ownerReferences": "rs"}}) is None
    assert controller_ref({"metadata": {"ownerReferences": [None, 3]}}) is None


def test_our_keys_are_defined_once():
    assert shadow.SHADOW_LABEL is SHADOW_OF and sides.SHADOW_OF is SHADOW_OF
    assert render.NVIDIA_DOMAIN is NVIDIA_DRIVER and sides.NVIDIA_DOMAIN is NVIDIA_DRIVER
