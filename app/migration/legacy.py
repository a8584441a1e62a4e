"""What a pod asks of the device plugin: which resources are legacy GPU requests under the rules,
the pod's asks (asks.PodAsks), and whether it already uses DRA claims. Pure."""

from __future__ import annotations

from app.policy import MigrationRules

from .asks import PodAsks, pod_asks

# Resources of GPU systems we know: one without a rule is unmigratable, never left on a migrated pod silently.
GPU_RESOURCE_PREFIXES = ("nvidia.com/", "koordinator.sh/gpu", "volcano.sh/gpu", "volcano.sh/vgpu", "hami.io/")


def uses_dra(spec: dict) -> bool:
    if spec.get("resourceClaims"):
        return True
    return any((c.get("resources") or {}).get("claims") for c in all_containers(spec))


def all_containers(spec: dict):
    for list_name in ("initContainers", "containers"):
        for container in spec.get(list_name) or []:
            if isinstance(container, dict):
                yield container


def is_legacy(resource: str, rules: MigrationRules) -> bool:
    """Whether a resource name is a legacy GPU request under these rules (or looks like one)."""
    return bool(rules.rule_for(resource)) or str(resource).startswith(GPU_RESOURCE_PREFIXES)


def legacy_asks(spec: dict, rules: MigrationRules) -> PodAsks:
    """The pod's legacy GPU asks, parsed once (asks.PodAsks: what the kubelet and quota count)."""
    return pod_asks(spec, lambda resource: is_legacy(resource, rules))


def legacy_resources(spec: dict, rules: MigrationRules) -> list[tuple[str, str]]:
    """(container, resource) pairs that are legacy GPU requests under these rules."""
    found: dict[tuple[str, str], None] = {}  # ordered set: linear in containers
    for container in all_containers(spec):
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            values = resources.get(section) if isinstance(resources, dict) else None
            for key in (values if isinstance(values, dict) else {}):
                if is_legacy(key, rules):
                    found[(str(container.get("name")), str(key))] = None
    return list(found)
