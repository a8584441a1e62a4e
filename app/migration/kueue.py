"""What Kueue counts of a rewritten pod's claims. Pure.

Kueue (0.14+, feature gate DynamicResourceAllocation, alpha) counts the devices of a pod's
ResourceClaimTemplates against a ClusterQueue only through its Configuration's
`resources.deviceClassMappings` (a class counts as one resource). It counts only the plainest
requests: `exactly` with a count, no CEL selectors, adminAccess or allocationMode All, no
firstAvailable, constraints or config (sigs.k8s.io/kueue v0.17, pkg/dra/claims.go; 0.20 charges a
firstAvailable of one count and logical resource behind a gate); a workload with anything else, or
a class not mapped, is not admitted: the planner gives such pods one plain request. With the gate off its claims count
as nothing (kueue#10504). So a pod Kueue admits by itself is rewritten only onto templates Kueue
counts as the resource the pod asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import yaml

from app.common import submap
from app.common import BridgeError, view_of
from app.common.vocabulary import KUEUE_CONFIG, KUEUE_DEPLOYMENT

KUEUE_DRA_GATE = "DynamicResourceAllocation"
# Kueue 0.20 (CHANGELOG-0.20.md: #13989, #14558): a deviceClassMapping named `pods` (reserved:
# the pod count) stops its controller; kueue.x-k8s.io/v1beta1 is no longer served (v1beta2 since 0.15).
RESERVED_MAPPING = "pods"
SERVED_VERSION = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class KueueView:
    """Kueue's configuration as read from the cluster: which DeviceClass counts as which
    resource, and whether its DRA support is on (Configuration featureGates or the manager's
    --feature-gates flag)."""

    mappings: Mapping[str, str] = field(default_factory=dict)  # DeviceClass -> resource
    dra_gate: bool = False
    api_version: str = "config.kueue.x-k8s.io/v1beta2"

    @property
    def refused(self) -> str | None:
        """What in the configuration Kueue 0.20 refuses (its controller stops); None: nothing."""
        named = sorted(c for c, r in self.mappings.items() if r == RESERVED_MAPPING)
        if not named:
            return None
        return (f"Kueue's Configuration maps DeviceClass {', '.join(named)} to a resource named "
                f"{RESERVED_MAPPING!r}: Kueue 0.20 stops its controller on that name (it counts pods); rename "
                "the deviceClassMapping")


def unserved_versions(objects: Iterable[dict]) -> str | None:
    """A note when Kueue objects are of kueue.x-k8s.io/v1beta1, which Kueue 0.20 no longer serves."""
    old = sorted({f"{o.get('kind')}/{view_of(o).name}" for o in objects
                  if o.get("apiVersion") == "kueue.x-k8s.io/v1beta1"})
    if not old:
        return None
    return (f"{len(old)} Kueue object(s) are kueue.x-k8s.io/v1beta1 ({', '.join(old[:3])}): Kueue 0.20 serves only "
            f"{SERVED_VERSION} (since 0.15); dra-bridge writes {SERVED_VERSION} objects only")


def configured_mappings(configuration: dict | None) -> dict[str, str]:
    """DeviceClass -> the resource Kueue's Configuration counts it as (its deviceClassMappings)."""
    resources = (configuration or {}).get("resources") if isinstance(configuration, dict) else None
    out = {}
    for mapping in (resources or {}).get("deviceClassMappings") or [] if isinstance(resources, dict) else []:
        if isinstance(mapping, dict):
            for cls in mapping.get("deviceClassNames") or []:
                out[str(cls)] = str(mapping.get("name"))
    return out


def kueue_view_of(found: tuple[dict | None, dict | None]) -> KueueView | None:
    """The view of Kueue's ConfigMap and manager Deployment as read (kube.read_kueue); None
    where the ConfigMap is absent (Kueue not installed, or configured elsewhere)."""
    configmap, deployment = found
    return None if configmap is None else kueue_view(configuration_in(configmap), manager_args(deployment))


def kueue_in_objects(objects: Iterable[dict]) -> KueueView | None:
    """Kueue's view from exported objects: its ConfigMap or Configuration documents (later ones
    win, as a merge would) and its manager Deployment; None when none is a Configuration."""
    merged: dict = {}
    args: list[str] = []
    found_any = False
    for obj in objects:
        configuration = configuration_in(obj)
        if configuration is not None:
            merged.update(configuration)
            found_any = True
        elif obj.get("kind") == "Deployment" and view_of(obj).name == KUEUE_DEPLOYMENT:
            args = manager_args(obj)
    return kueue_view(merged, args) if found_any else None


def configuration_in(obj: dict) -> dict | None:
    """Kueue's Configuration: the document itself, or inside its ConfigMap (kueue-manager-config);
    None for any other object. BridgeError when the ConfigMap's Configuration is not YAML."""
    if obj.get("kind") == "Configuration":
        return obj
    if obj.get("kind") == "ConfigMap" and view_of(obj).name == KUEUE_CONFIG[1]:
        text = (obj.get("data") or {}).get(KUEUE_CONFIG[2])
        try:
            found = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError as exc:
            raise BridgeError(f"ConfigMap {KUEUE_CONFIG[1]}: data.{KUEUE_CONFIG[2]} is not YAML: {exc}") from exc
        return found if isinstance(found, dict) else None
    return None


def manager_args(deployment: dict | None) -> list[str]:
    """The arguments of Kueue's manager container (its --feature-gates), from its Deployment."""
    spec = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    chosen = next((c for c in containers if c.get("name") == "manager"), containers[0] if containers else {})
    return [str(a) for a in (chosen.get("command") or []) + (chosen.get("args") or [])]


def _flag_gates(args: Iterable[str]) -> dict[str, bool]:
    """--feature-gates=A=true,B=false (the last flag wins, as Go's flag parsing does)."""
    out: dict[str, bool] = {}
    items = list(args)
    for i, arg in enumerate(items):
        value = None
        if arg.startswith("--feature-gates="):
            value = arg.split("=", 1)[1]
        elif arg == "--feature-gates" and i + 1 < len(items):
            value = items[i + 1]
        for pair in (value or "").split(","):
            name, _, on = pair.partition("=")
            if name.strip():
                out[name.strip()] = on.strip().lower() == "true"
    return out


def kueue_view(configuration: dict | None, manager_args: Iterable[str] = ()) -> KueueView:
    """The view of a Configuration document and the manager container's arguments."""
    config = configuration if isinstance(configuration, dict) else {}
    gates = submap(config, "featureGates")
    gate = _flag_gates(manager_args).get(KUEUE_DRA_GATE, gates.get(KUEUE_DRA_GATE) is True)
    return KueueView(configured_mappings(config), bool(gate),
                     str(config.get("apiVersion") or KueueView.api_version))


def _unsupported(template: dict) -> str | None:
    """What in a claim template Kueue's DRA count refuses; None when it counts it."""
    devices = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {})
    if devices.get("constraints"):
        return "constraints (matchAttribute)"
    if devices.get("config"):
        return "device config"
    for request in devices.get("requests") or []:
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if not isinstance(exactly, dict):
            return "firstAvailable"
        if exactly.get("selectors"):
            return "CEL selectors"
        if exactly.get("adminAccess"):
            return "adminAccess"
        if exactly.get("allocationMode", "ExactCount") != "ExactCount":
            return f"allocationMode {exactly.get('allocationMode')}"
    return None


def _classes(template: dict) -> set[str]:
    devices = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {})
    return {str((r.get("exactly") or {}).get("deviceClassName")) for r in devices.get("requests") or []
            if isinstance(r, dict) and isinstance(r.get("exactly"), dict)}


def kueue_uncounted(templates: list[dict], resources: list[str], listed: Iterable[str],
                    view: KueueView | None) -> str | None:
    """Why Kueue would not count a rewritten pod's claims against the resources the pod asks
    for; None when it would. listed: the policy's migration.kueueDeviceClasses (the admin says
    Kueue maps them, with its DRA support on); view: Kueue's configuration as read (None: not
    read)."""
    listed = set(listed)
    for template in templates:
        name = view_of(template).name or "the claim template"
        unsupported = _unsupported(template)
        if unsupported:
            return f"its claim template {name} uses {unsupported}, which Kueue's DRA support cannot count"
        for cls in sorted(_classes(template)):
            if cls in listed:
                continue
            if view is None:
                return (f"DeviceClass {cls} is not in the policy's migration.kueueDeviceClasses, and Kueue's "
                        f"configuration (ConfigMap {KUEUE_CONFIG[0]}/{KUEUE_CONFIG[1]}) was not found or could "
                        "not be read")
            mapped = view.mappings.get(cls)
            if mapped is None:
                return f"Kueue's deviceClassMappings do not map DeviceClass {cls}"
            if mapped not in resources:
                return f"Kueue counts DeviceClass {cls} as {mapped}, not {', '.join(resources)}"
            if not view.dra_gate:
                return f"Kueue maps DeviceClass {cls} but runs without its {KUEUE_DRA_GATE} feature gate"
    return None
