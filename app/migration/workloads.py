"""Find pod specs inside any Kubernetes object by structure (workloads and custom resources)."""

from __future__ import annotations

from collections.abc import Iterator


def is_pod_spec(node: object) -> bool:
    return isinstance(node, dict) and isinstance(node.get("containers"), list) and all(
        isinstance(c, dict) for c in node["containers"])


def pod_templates(obj: dict) -> Iterator[tuple[str, dict]]:
    """Yield (path, holder) where holder['spec'] is a pod spec; a Pod yields itself as ''."""
    if obj.get("kind") == "Pod" and is_pod_spec(obj.get("spec")):
        yield "", obj
        return
    yield from _walk(obj, "")


def _walk(node: object, path: str) -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        for key, value in node.items():
            child = f"{path}.{key}" if path else str(key)
            if key == "spec" and is_pod_spec(value):
                yield path, node
                continue
            yield from _walk(value, child)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")
