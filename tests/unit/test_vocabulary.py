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


def test_no_module_writes_a_key_of_the_vocabulary_again():
    """Every label, annotation, attribute and driver name the vocabulary defines is spelt there
    only: a module that writes one as a literal would drift from it."""
    import pathlib
    import re

    from app.common import vocabulary
    keys = {v for k, v in vars(vocabulary).items() if k.isupper() and isinstance(v, str) and
            re.fullmatch(r"[a-z0-9.-]+\.[a-z]+(/[A-Za-z0-9.-]+)?(=[a-z]+)?", v)}
    assert {"app.kubernetes.io/managed-by", "dra-bridge.io/rollout-step", "gpu.nvidia.com",
            "nvidia.com/gpu.deploy.device-plugin"} <= keys
    root = pathlib.Path(vocabulary.__file__).parents[1]
    found = [f"{path.relative_to(root)}: {key}" for path in sorted(root.rglob("*.py")) if path.name != "vocabulary.py"
             for key in keys if f'"{key}"' in path.read_text() or f"'{key}'" in path.read_text()]
    assert not found, found
