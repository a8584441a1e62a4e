"""manifests/ as an operator has it after the README's install steps: the image named in
manifests/image (the shipped tree refuses to render until it is)."""

from __future__ import annotations

import functools
import pathlib
import shutil
import tempfile

import yaml

from tests.conftest import ROOT

IMAGE = ("registry.example.com/dra-bridge", "0.1.0")


def name_image(tree: pathlib.Path, name: str = IMAGE[0], tag: str = IMAGE[1]) -> None:
    """What the operator does: newName and newTag in TREE/image/kustomization.yaml."""
    path = tree / "image" / "kustomization.yaml"
    doc = yaml.safe_load(path.read_text())
    [entry] = doc["images"]
    entry.update(newName=name, newTag=tag)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@functools.cache
def operator_tree() -> pathlib.Path:
    """A copy of manifests/ with the image named (one per test process; the repository's is never edited)."""
    tree = pathlib.Path(tempfile.mkdtemp(prefix="dra-bridge-manifests-")) / "manifests"
    shutil.copytree(ROOT / "manifests", tree, symlinks=True)
    name_image(tree)
    return tree


def operator_path(path: str) -> pathlib.Path:
    """ROOT/path, or its place in operator_tree() when it lies under manifests/."""
    relative = pathlib.PurePosixPath(path)
    if relative.parts and relative.parts[0] == "manifests":
        return operator_tree().joinpath(*relative.parts[1:])
    return ROOT / path
