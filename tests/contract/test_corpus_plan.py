"""`plan` over the corpus with the inventory a newcomer builds from our own tools: the reporter's
`--once` printout for each fake node (slices and NVIDIA's DeviceClasses) plus `dra-bridge
classes` (the native-path classes). Every object gets a path, and none is unsatisfiable only
because a DeviceClass was missing."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import CORPUS, CORPUS_ABSENT, ROOT

FAKES = {"gpu-h100-0": "h100x8.yaml", "gpu-a100-0": "a100-mig.yaml", "gpu-l4-0": "l4x4.yaml"}
PATHS = {"native", "rewrite", "legacy", "none"}


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inventory")
    docs = []
    for node, fake in FAKES.items():
        out = cli("reporter", "--once", "--backend", f"fake:{ROOT / 'app' / 'data' / 'fake' / fake}", "--node-name", node)
        assert out.returncode == 0, out.stderr
        docs += [d for d in yaml.safe_load_all(out.stdout) if d]
    # One copy of each DeviceClass (every printout carries NVIDIA's two).
    unique = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    reported = folder / "reported.yaml"
    reported.write_text(yaml.safe_dump_all(list(unique.values())))
    classes = cli("classes", "--inventory", str(reported))
    assert classes.returncode == 0, classes.stderr
    generated = [d for d in yaml.safe_load_all(classes.stdout) if d]
    assert {d["spec"]["extendedResourceName"] for d in generated} >= {"nvidia.com/gpu"}
    full = folder / "inventory.yaml"
    full.write_text(yaml.safe_dump_all(list(unique.values()) + generated))
    return full


@pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_ABSENT)
def test_every_corpus_object_gets_a_path_and_no_class_is_missing(inventory):
    files = sorted(str(p) for folder in ("legacy", "hami") for p in (CORPUS / folder).glob("*.yaml"))
    args = [a for f in files for a in ("-f", f)]
    out = cli("plan", *args, "--inventory", str(inventory), "-o", "json")
    assert out.returncode in (0, 1), out.stderr  # 1: some object is unsatisfiable here
    report = json.loads(out.stdout)
    assert report["inventoryChecked"]
    objects = report["objects"]
    assert len(objects) > 50
    by_path = {}
    for obj in objects:
        assert {p for p in obj["path"].split("+")} <= PATHS, obj
        by_path.setdefault(obj["path"], []).append(obj)
        for reason in obj["reasons"]:
            assert "does not exist" not in reason, (obj["source"], reason)
    # The native classes serve plain GPU pods; HAMi shares are rewritten; every path is reported.
    assert by_path.get("native") and by_path.get("rewrite")
    assert all(o["reasons"] for o in by_path.get("legacy", [])), "a legacy object says why"
