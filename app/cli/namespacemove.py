"""What `certs --namespace` adds to its overlay so the whole base moves, not only the Secret:
kustomize's namespace transformer moves namespaced objects, Service references and ServiceAccount
subjects; these JSON patches move what it cannot see (namespaces named inside selectors, flags and
CEL). It also stamps the namespace on the cluster-scoped ValidatingAdmissionPolicies (its schema
predates them): the API server drops it there. Pure."""

from __future__ import annotations

import re

import yaml

from app.common import view_of


def moved_to(objects: list[dict], namespace: str) -> list[dict]:
    """namespace_patches that move a base (its Namespace object names where it is) to `namespace`;
    none where it is there already."""
    base = next((view_of(o).name for o in objects if o.get("kind") == "Namespace"), "dra-bridge")
    return namespace_patches(objects, base, namespace) if namespace != base else []


def as_kustomize_patches(moves: list[dict]) -> list[dict]:
    """namespace_patches as entries of a kustomization's `patches`."""
    return [{"target": move["target"], "patch": yaml.safe_dump(move["ops"], width=100000)} for move in moves]


def namespace_patches(objects: list[dict], old: str, new: str) -> list[dict]:
    """kustomize `patches` entries: each object of the base that names `old` as a namespace."""
    out = []
    for obj in objects:
        view = view_of(obj)
        ops = [{"op": "replace", "path": path, "value": value} for path, value in _named(obj, "", old, new)]
        if ops:
            out.append({"target": {"kind": obj["kind"], "name": view.name}, "ops": ops})
    return out


def _named(node, path: str, old: str, new: str):
    """(JSON pointer, new value) of every place that names namespace `old`."""
    if isinstance(node, dict):
        for key, value in node.items():
            child = f"{path}/{key.replace('~', '~0').replace('/', '~1')}"
            if key == "kubernetes.io/metadata.name" and value == old:
                yield child, new
            elif key == "values" and isinstance(value, list) and old in value and "metadata.name" in str(
                    node.get("key", "")):
                yield child, [new if v == old else v for v in value]
            else:
                yield from _named(value, child, old, new)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _named(value, f"{path}/{i}", old, new)
    elif isinstance(node, str):
        moved = _in_text(node, old, new)
        if moved != node:
            yield path, moved


def _in_text(text: str, old: str, new: str) -> str:
    """A namespace inside a flag (`--x=NS/NAME`) or a service account name (`system:serviceaccount:NS:`)."""
    text = re.sub(rf"^(--[a-z-]+=){re.escape(old)}/", rf"\g<1>{new}/", text)
    return text.replace(f"system:serviceaccount:{old}:", f"system:serviceaccount:{new}:")
