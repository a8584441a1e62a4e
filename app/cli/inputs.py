"""What the commands read: manifests from files, folders or stdin, and device inventories
(a file of ResourceSlices and DeviceClasses, or the bundled example)."""

from __future__ import annotations

import os
import sys
from importlib import resources

from app import dra
from app.common import InputError, parse_objects, read_objects

EXAMPLE_INVENTORY = "data/example-inventory.yaml"


def read_inputs(paths: list[str]) -> list[tuple[str, list[tuple[int, dict]]]]:
    """(source, [(line, object)]) for each file; a folder is walked in name order, `-` is stdin."""
    out = []
    for path in paths:
        if path == "-":
            out.append(("<stdin>", parse_objects(sys.stdin.read(), "<stdin>")))
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith((".yaml", ".yml", ".json")):
                        full = os.path.join(root, name)
                        out.append((full, read_objects(full)))
        elif os.path.exists(path):
            out.append((path, read_objects(path)))
        else:
            raise InputError(path, "no such file or folder")
    return out


def read_some_inputs(paths: list[str]) -> list[tuple[str, list[tuple[int, dict]]]]:
    """read_inputs, refusing inputs that hold no object at all (an empty file is a mistake)."""
    inputs = read_inputs(paths)
    if not any(objects for _source, objects in inputs):
        raise InputError(" ".join(paths), "no Kubernetes objects in the input (an empty file or folder?)")
    return inputs


def load_inventory(path: str | None) -> dra.Inventory:
    """The inventory in a file, or the bundled example inventory when `path` is None."""
    if path:
        return dra.inventory_from_objects(read_objects(path), path)
    text = resources.files("app").joinpath(EXAMPLE_INVENTORY).read_text("utf-8")
    return dra.inventory_from_objects(parse_objects(text, "example-inventory.yaml"), "bundled example inventory")
