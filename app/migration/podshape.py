"""Type checks of the pod fields the planner reads. Pure.

A real API server decodes pods into typed objects before calling webhooks, but `plan`, tests
and hostile clients can hand us anything: a wrong type gets a message naming the field.
"""

from __future__ import annotations

_SCALAR = (str, int, float)


def _expect(value, kind, path: str, errors: list[str], optional: bool = True) -> bool:
    if value is None and optional:
        return False
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        errors.append(f"{path}: expected {name}, got {type(value).__name__}")
        return False
    return True


def _string_map(value, path: str, errors: list[str]) -> None:
    if _expect(value, dict, path, errors):
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                errors.append(f"{path}[{key}]: expected a string value")
                return


def _containers(items, path: str, errors: list[str]) -> None:
    if not _expect(items, list, path, errors):
        return
    for i, c in enumerate(items):
        where = f"{path}[{i}]"
        if not _expect(c, dict, where, errors, optional=False):
            continue
        _expect(c.get("name"), str, f"{where}.name", errors, optional=False)
        resources = c.get("resources")
        if not _expect(resources, dict, f"{where}.resources", errors):
            continue
        for section in ("limits", "requests"):
            values = resources.get(section)
            if _expect(values, dict, f"{where}.resources.{section}", errors):
                for key, value in values.items():
                    if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, _SCALAR):
                        errors.append(f"{where}.resources.{section}[{key}]: expected a quantity")
        _expect(resources.get("claims"), list, f"{where}.resources.claims", errors)


def _affinity(value, errors: list[str]) -> None:
    if not _expect(value, dict, "spec.affinity", errors):
        return
    node = value.get("nodeAffinity")
    if not _expect(node, dict, "spec.affinity.nodeAffinity", errors):
        return
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if not _expect(required, dict, path, errors):
        return
    terms = required.get("nodeSelectorTerms")
    if not _expect(terms, list, f"{path}.nodeSelectorTerms", errors):
        return
    for i, term in enumerate(terms):
        where = f"{path}.nodeSelectorTerms[{i}]"
        if not _expect(term, dict, where, errors, optional=False):
            continue
        exprs = term.get("matchExpressions")
        if not _expect(exprs, list, f"{where}.matchExpressions", errors):
            continue
        for j, expr in enumerate(exprs):
            at = f"{where}.matchExpressions[{j}]"
            if _expect(expr, dict, at, errors, optional=False):
                _expect(expr.get("key"), str, f"{at}.key", errors, optional=False)
                _expect(expr.get("operator"), str, f"{at}.operator", errors, optional=False)
                values = expr.get("values")
                if _expect(values, list, f"{at}.values", errors) and not all(isinstance(v, str) for v in values):
                    errors.append(f"{at}.values: expected strings")


def pod_errors(pod: object) -> list[str]:
    """Field-named type errors in what the planner reads; [] when the shape is fine."""
    errors: list[str] = []
    if not isinstance(pod, dict):
        _expect(pod, dict, "(object)", errors, optional=False)
        return errors
    metadata = pod.get("metadata")
    if _expect(metadata, dict, "metadata", errors) and isinstance(metadata, dict):
        _string_map(metadata.get("annotations"), "metadata.annotations", errors)
    spec = pod.get("spec")
    if not _expect(spec, dict, "spec", errors, optional=False) or not isinstance(spec, dict):
        return errors
    _containers(spec.get("containers"), "spec.containers", errors)
    _containers(spec.get("initContainers"), "spec.initContainers", errors)
    _string_map(spec.get("nodeSelector"), "spec.nodeSelector", errors)
    _affinity(spec.get("affinity"), errors)
    _expect(spec.get("resourceClaims"), list, "spec.resourceClaims", errors)
    return errors
