"""Which Kubernetes release dra-bridge talks to, and which DRA features are on there: each
release's default feature gates (read from upstream's pkg/features/kube_features.go of 1.34.4,
1.35.4, 1.36.3, 1.37.2 and 1.38.0-beta.0), the fields each feature keeps in the objects we write
(an API server drops those of a feature that is off, without a word), and which of them a
server's answer lost. Pure."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

OLDEST, NEWEST = 34, 38  # resource.k8s.io/v1 is GA from 1.34; 1.38 is the newest release we know
DEFAULT_VERSION = "1.37"  # the current release: what an offline command judges by when not told

# Gates, by upstream's names.
ADMIN_ACCESS = "DRAAdminAccess"
PRIORITIZED_LIST = "DRAPrioritizedList"
DEVICE_TAINTS = "DRADeviceTaints"
DEVICE_TAINT_RULES = "DRADeviceTaintRules"
PARTITIONABLE = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
EXTENDED_RESOURCE = "DRAExtendedResource"
BINDING_CONDITIONS = "DRADeviceBindingConditions"
DEVICE_STATUS = "DRAResourceClaimDeviceStatus"
FRACTIONAL_CAPACITY = "DRAFractionalCapacityRange"
LIST_TYPE_ATTRIBUTES = "DRAListTypeAttributes"

# gate -> ((first minor of a stage, on by default), ...), as upstream's versioned specs say.
# A gate absent from a release (before its first minor) is off and cannot be turned on there.
_HISTORY: dict[str, tuple[tuple[int, bool], ...]] = {
    ADMIN_ACCESS: ((32, False), (34, True)),
    PRIORITIZED_LIST: ((33, False), (34, True)),
    DEVICE_TAINTS: ((33, False), (36, True)),
    DEVICE_TAINT_RULES: ((35, False), (37, True)),
    PARTITIONABLE: ((33, False), (36, True)),
    CONSUMABLE_CAPACITY: ((34, False), (36, True)),
    EXTENDED_RESOURCE: ((34, False), (36, True)),
    BINDING_CONDITIONS: ((34, False), (36, True)),
    DEVICE_STATUS: ((33, True),),
    FRACTIONAL_CAPACITY: ((37, True),),
    LIST_TYPE_ATTRIBUTES: ((36, False),),
}
GATES = tuple(_HISTORY)

# What each gate keeps in the objects dra-bridge writes or reads: (kind, path); "*" is any list
# element or map key. A claim's paths are under `spec` (a template's under `spec.spec`).
_CLAIM = (("devices", "requests", "*", "firstAvailable"), PRIORITIZED_LIST), \
    (("devices", "requests", "*", "exactly", "adminAccess"), ADMIN_ACCESS), \
    (("devices", "requests", "*", "exactly", "tolerations"), DEVICE_TAINTS), \
    (("devices", "requests", "*", "firstAvailable", "*", "tolerations"), DEVICE_TAINTS), \
    (("devices", "requests", "*", "exactly", "capacity"), CONSUMABLE_CAPACITY), \
    (("devices", "requests", "*", "firstAvailable", "*", "capacity"), CONSUMABLE_CAPACITY), \
    (("devices", "constraints", "*", "distinctAttribute"), CONSUMABLE_CAPACITY)
KEPT_BY: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "ResourceSlice": (
        (("spec", "devices", "*", "taints"), DEVICE_TAINTS),
        (("spec", "sharedCounters"), PARTITIONABLE),
        (("spec", "perDeviceNodeSelection"), PARTITIONABLE),
        (("spec", "devices", "*", "consumesCounters"), PARTITIONABLE),
        (("spec", "devices", "*", "nodeName"), PARTITIONABLE),
        (("spec", "devices", "*", "nodeSelector"), PARTITIONABLE),
        (("spec", "devices", "*", "allNodes"), PARTITIONABLE),
        (("spec", "devices", "*", "allowMultipleAllocations"), CONSUMABLE_CAPACITY),
        (("spec", "devices", "*", "capacity", "*", "requestPolicy"), CONSUMABLE_CAPACITY),
        (("spec", "devices", "*", "bindsToNode"), BINDING_CONDITIONS),
        (("spec", "devices", "*", "bindingConditions"), BINDING_CONDITIONS),
        (("spec", "devices", "*", "bindingFailureConditions"), BINDING_CONDITIONS),
    ),
    "DeviceClass": ((("spec", "extendedResourceName"), EXTENDED_RESOURCE),),
    "ResourceClaim": tuple((("spec", *p), g) for p, g in _CLAIM),
    "ResourceClaimTemplate": tuple((("spec", "spec", *p), g) for p, g in _CLAIM),
}
# Claim fields 1.34 keeps although their gate is off (its strategies drop them from 1.35 on: no
# tolerations drop, and a distinctAttribute loop over copies), as its API server showed.
_KEPT_BY_134 = {p for p, _g in _CLAIM if p[-1] in ("tolerations", "distinctAttribute")}


def drops(release: "Release", pattern: tuple[str, ...], gate: str) -> bool:
    """Whether the release's API server drops the field at `pattern` (a KEPT_BY path)."""
    if release.has(gate):
        return False
    return not (release.minor < 35 and _claim_path(pattern) in _KEPT_BY_134)


def _claim_path(pattern: tuple[str, ...]) -> tuple[str, ...]:
    """A claim or template path without its `spec` (or `spec.spec`) prefix."""
    while pattern and pattern[0] == "spec":
        pattern = pattern[1:]
    return pattern


# What a release does without a gate, where that is more than dropping fields.
WHAT_IT_DOES = {
    DEVICE_TAINTS: "device taints (an unhealthy GPU stays allocatable)",
    PARTITIONABLE: "partitionable devices (shared counters: MIG placements and their GPU allocated at once)",
    CONSUMABLE_CAPACITY: "consumable capacity (devices shared by several claims)",
    EXTENDED_RESOURCE: "extended resources served by DRA (the native path, KEP-5004)",
    PRIORITIZED_LIST: "prioritized lists (firstAvailable)",
    ADMIN_ACCESS: "admin access",
    BINDING_CONDITIONS: "binding conditions",
}


class UnknownRelease(ValueError):
    """A version text that names no Kubernetes release dra-bridge can serve."""


@dataclass(frozen=True)
class Release:
    """version: as known ("1.34.4", "1.38.0-beta.0", or "1.34" from a flag); minor: 34..38 (a
    newer server is judged as the newest release we know, and says so); gates: the DRA gates on;
    source: how it is known, as every command says it."""

    version: str
    minor: int
    gates: frozenset[str] = field(default_factory=frozenset)
    source: str = ""

    def has(self, gate: str) -> bool:
        return gate in self.gates

    def with_gates(self, changes: dict[str, bool], why: str) -> Release:
        """The release with an admin's gate settings (a live check, --feature-gates)."""
        gates = set(self.gates)
        for gate, on in changes.items():
            if gate not in _HISTORY:
                raise UnknownRelease(f"unknown DRA feature gate {gate!r} (known: {', '.join(GATES)})")
            if on and not _exists(gate, self.minor):
                raise UnknownRelease(f"feature gate {gate} does not exist in Kubernetes 1.{self.minor}")
            (gates.add if on else gates.discard)(gate)
        return Release(self.version, self.minor, frozenset(gates), f"{self.source}; {why}")

    def describe(self) -> str:
        """"Kubernetes 1.34.4 (the API server's /version)" for "judged against" lines."""
        return f"Kubernetes {self.version} ({self.source})"


def _exists(gate: str, minor: int) -> bool:
    return _HISTORY[gate][0][0] <= minor


def why_off(release: Release, gate: str) -> str:
    """"DRAExtendedResource is off; on by default from 1.36": why a release lacks a feature."""
    since = first_default_minor(gate)
    return f"{gate} is off" + (f"; on by default from 1.{since}" if since and since > release.minor else "")


def first_default_minor(gate: str) -> int | None:
    """The first release that has `gate` on by default (None: none up to 1.38 does)."""
    return next((since for since, default in _HISTORY.get(gate, ()) if default), None)


def default_gates(minor: int) -> frozenset[str]:
    """The DRA gates on by default in Kubernetes 1.<minor>."""
    on = set()
    for gate, stages in _HISTORY.items():
        state = None
        for since, default in stages:
            if since <= minor:
                state = default
        if state:
            on.add(gate)
    return frozenset(on)


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


def parse(text: str, source: str) -> Release:
    """A release from a version text: "1.34", "v1.34.4", "1.38.0-beta.0", a managed platform's
    gitVersion ("v1.35.4-gke.1200", "v1.36.3+k3s1"). UnknownRelease names what is wrong."""
    match = _VERSION.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise UnknownRelease(f"{text!r} is not a Kubernetes version (like 1.34 or v1.34.4)")
    major, minor = int(match.group(1)), int(match.group(2))
    if major != 1 or minor < OLDEST:
        raise UnknownRelease(f"Kubernetes {major}.{minor} has no resource.k8s.io/v1: dra-bridge needs 1.{OLDEST} "
                             f"or newer")
    version = f"{major}.{minor}" + (f".{match.group(3)}" if match.group(3) else "")
    pre = match.group(4) or ""
    if re.match(r"^-(alpha|beta|rc)\.\d+$", pre):  # upstream's own pre-releases, not a vendor's suffix
        version += pre
    if minor > NEWEST:
        return Release(version, NEWEST, default_gates(NEWEST),
                       f"{source}; newer than 1.{NEWEST}, judged by 1.{NEWEST}'s defaults")
    return Release(version, minor, default_gates(minor), source)


def default_release() -> Release:
    return parse(DEFAULT_VERSION, "the default: no --kube-version")


def from_server(version_info: dict) -> Release:
    """From the API server's /version answer (gitVersion, else major.minor)."""
    git = version_info.get("gitVersion") if isinstance(version_info, dict) else None
    if isinstance(git, str) and git:
        return parse(git, "the API server's /version")
    major = str((version_info or {}).get("major", "")).rstrip("+")
    minor = str((version_info or {}).get("minor", "")).rstrip("+")
    return parse(f"{major}.{minor}", "the API server's /version")


# -- what an object holds of each feature, and what a server dropped -------------------------
def _walk(node, pattern: tuple[str, ...], at: tuple):
    """Concrete paths of `pattern` present in `node`."""
    if not pattern:
        yield at
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        items = enumerate(node) if isinstance(node, list) else node.items() if isinstance(node, dict) else ()
        for key, child in items:
            yield from _walk(child, rest, (*at, key))
    elif isinstance(node, dict) and head in node and node[head] is not None:
        yield from _walk(node[head], rest, (*at, head))


def holds(obj, pattern: tuple[str, ...]) -> bool:
    """Whether `obj` has a field at `pattern` ("*": any list element or map key)."""
    return next(_walk(obj, pattern, ()), None) is not None


def _get(node, path: tuple):
    for key in path:
        if isinstance(node, dict) and isinstance(key, str) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return None
    return node


def field_name(path: tuple) -> str:
    """spec.devices[0].taints"""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else str(key)
    return out


@dataclass(frozen=True)
class Lost:
    """A field an object holds that a release drops (or a server dropped), and the gate it needs."""

    path: str
    gate: str

    def __str__(self) -> str:
        return f"{self.path} (feature gate {self.gate})"


def _kind(obj, kind: str | None) -> str:
    kind = kind or (obj.get("kind") if isinstance(obj, dict) else None)
    return kind if isinstance(kind, str) else ""


def unkept(obj: dict, release: Release, kind: str | None = None) -> list[Lost]:
    """The fields of `obj` that `release` drops: the gate of each is off there."""
    kind = _kind(obj, kind)
    out = []
    for pattern, gate in KEPT_BY.get(kind, ()):
        if not drops(release, pattern, gate):
            continue
        out.extend(Lost(field_name(p), gate) for p in _walk(obj, pattern, ()))
    return out


def dropped(sent: dict, returned: dict, kind: str | None = None) -> list[Lost]:
    """The gated fields `sent` held that the server's answer `returned` lacks: the server has the
    gate off, whatever its release says. Only the fields KEPT_BY names are compared (the server
    defaults and normalizes others)."""
    kind = kind or (sent.get("kind") if isinstance(sent, dict) else None)
    out = []
    for pattern, gate in KEPT_BY.get(kind, ()):
        for path in _walk(sent, pattern, ()):
            if _get(returned, path) is None:
                out.append(Lost(field_name(path), gate))
    return out


def gates_from_losses(losses: list[Lost]) -> list[str]:
    return sorted({lost.gate for lost in losses})


def strip(obj: dict, release: Release, kind: str | None = None) -> tuple[dict, list[Lost]]:
    """`obj` as `release`'s API server would store it (the fields of its gates that are off
    removed), and what was removed; `obj` itself when nothing is (never changed in place)."""
    losses = []
    kind = _kind(obj, kind)
    paths = [p for pattern, gate in KEPT_BY.get(kind, ()) if drops(release, pattern, gate)
             for p in _walk(obj, pattern, ())]
    if not paths:
        return obj, losses
    out = copy.deepcopy(obj)
    for pattern, gate in KEPT_BY.get(kind, ()):
        if not drops(release, pattern, gate):
            continue
        for path in list(_walk(out, pattern, ())):
            parent = _get(out, path[:-1])
            if isinstance(parent, dict) and path[-1] in parent:
                del parent[path[-1]]
                losses.append(Lost(field_name(path), gate))
    return out, losses


OLD_DRA_VERSIONS = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")


def old_dra_objects(objects) -> str | None:
    """A note naming objects written in a DRA version no release from 1.34 serves by default."""
    old = sorted({f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')} ({o.get('apiVersion')})"
                  for o in objects if isinstance(o, dict) and o.get("apiVersion") in OLD_DRA_VERSIONS})
    if not old:
        return None
    return (f"{len(old)} object(s) are written in a DRA version that Kubernetes 1.{OLDEST} to 1.{NEWEST} serve only "
            f"where an admin turns it on ({', '.join(old[:3])}{' ...' if len(old) > 3 else ''}): write "
            "resource.k8s.io/v1")
