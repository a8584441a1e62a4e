"""Claim shapes: a ResourceClaim or template (v1, v1beta2, v1beta1) parsed into requests and
constraints, with the field path of whatever is malformed. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from app.common import parse_quantity

CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
SUPPORTED_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")


@dataclass
class Request:
    name: str
    device_class: str
    selectors: list[str]
    mode: str = "ExactCount"
    count: int = 1
    admin: bool = False
    path: str = ""
    tolerations: tuple = ()  # (key, operator, value, effect) per DeviceToleration, API defaults applied
    capacity: dict[str, Decimal] | None = None  # capacity.requests: name -> amount

    @property
    def base(self) -> str:
        """The request's own name (a subrequest's parent)."""
        return self.name.split("/", 1)[0]


def counted(req: Request) -> int | None:
    """A request's devices as written: its count (None for allocationMode All: the inventory decides)."""
    return req.count if req.mode != "All" else None


@dataclass
class ClaimSpec:
    requests: list[list[Request]]  # each entry: alternatives in priority order (one for `exactly`)
    constraints: list[dict] = field(default_factory=list)

    def most_devices(self, taken: Callable[[Request], int | None] = counted) -> int:
        """Devices the claim would take at most: per request, the most any of its alternatives
        would. taken: a request's devices (None: not known, counted as none)."""
        return sum(max((taken(r) or 0 for r in alternatives), default=0) for alternatives in self.requests)


class ClaimError(Exception):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def _request(raw: dict, path: str, name: str) -> Request:
    if not isinstance(raw, dict):
        raise ClaimError(path, "must be an object")
    device_class = raw.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise ClaimError(f"{path}.deviceClassName", "required")
    selectors = []
    raw_selectors = raw.get("selectors") or []
    if not isinstance(raw_selectors, list):
        raise ClaimError(f"{path}.selectors", "must be a list")
    for i, sel in enumerate(raw_selectors):
        cel_part = sel.get("cel") if isinstance(sel, dict) else None
        expr = cel_part.get("expression") if isinstance(cel_part, dict) else None
        if not isinstance(expr, str):
            raise ClaimError(f"{path}.selectors[{i}].cel.expression", "required")
        selectors.append(expr)
    mode = raw.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise ClaimError(f"{path}.allocationMode", f"unknown mode {mode!r}")
    count = raw.get("count", 1)
    if mode == "ExactCount" and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise ClaimError(f"{path}.count", "must be a whole number of at least 1")
    # DeviceSubRequest has no adminAccess field: the API server drops it there.
    admin = bool(raw.get("adminAccess")) and "/" not in name
    return Request(name, device_class, selectors, mode, count if mode == "ExactCount" else 0, admin, path,
                   _tolerations(raw.get("tolerations"), f"{path}.tolerations"),
                   _capacity_requests(raw.get("capacity"), f"{path}.capacity"))


def _capacity_requests(raw, path: str) -> dict[str, Decimal] | None:
    if raw is None:
        return None
    requests = raw.get("requests") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(requests, dict | None):
        raise ClaimError(path, "must be an object with a map of requests")
    if requests is None:
        return None
    out = {}
    for name, amount in raw["requests"].items():
        try:
            out[name] = parse_quantity(amount)
        except ValueError as exc:
            raise ClaimError(f"{path}.requests[{name}]", str(exc)) from exc
    return out


def _tolerations(raw, path: str) -> tuple:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ClaimError(path, "must be a list")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not all(isinstance(t.get(k, ""), str) for k in ("key", "operator", "value",
                                                                                       "effect")):
            raise ClaimError(f"{path}[{i}]", "must be an object of strings (key, operator, value, effect)")
        out.append((t.get("key", ""), t.get("operator") or "Equal", t.get("value", ""), t.get("effect", "")))
    return tuple(out)


def parse_claim_spec(spec: dict, path: str = "spec") -> ClaimSpec:
    """The `spec` of a ResourceClaim (or `spec.spec` of a template), v1 shape."""
    if not isinstance(spec, dict):
        raise ClaimError(path, "must be an object")
    devices = spec.get("devices") or {}
    if not isinstance(devices, dict):
        raise ClaimError(f"{path}.devices", "must be an object")
    raw_requests = devices.get("requests") or []
    if not isinstance(raw_requests, list):
        raise ClaimError(f"{path}.devices.requests", "must be a list")
    for field_name in ("constraints", "config"):
        if not isinstance(devices.get(field_name) or [], list):
            raise ClaimError(f"{path}.devices.{field_name}", "must be a list")
    requests = []
    for i, raw in enumerate(raw_requests):
        where = f"{path}.devices.requests[{i}]"
        name = (raw or {}).get("name") if isinstance(raw, dict) else None
        if not isinstance(name, str) or not name:
            raise ClaimError(f"{where}.name", "required")
        if raw.get("exactly") is not None:
            requests.append([_request(raw["exactly"], f"{where}.exactly", name)])
        elif raw.get("firstAvailable"):
            if not isinstance(raw["firstAvailable"], list):
                raise ClaimError(f"{where}.firstAvailable", "must be a list")
            requests.append([_request(sub, f"{where}.firstAvailable[{j}]",
                                      f"{name}/{sub.get('name') if isinstance(sub, dict) else None}")
                             for j, sub in enumerate(raw["firstAvailable"])])
        else:
            raise ClaimError(where, "needs 'exactly' or 'firstAvailable'")
    constraints = []
    for i, c in enumerate(devices.get("constraints") or []):
        where = f"{path}.devices.constraints[{i}]"
        if not isinstance(c, dict):
            raise ClaimError(where, "must be an object")
        names = c.get("requests") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ClaimError(f"{where}.requests", "must be a list of request names")
        for key in ("matchAttribute", "distinctAttribute"):
            if c.get(key) is not None and not isinstance(c[key], str):
                raise ClaimError(f"{where}.{key}", "must be a string")
        if c.get("matchAttribute") is None and c.get("distinctAttribute") is None:
            # As the API server's validation: refused at create (a 1.35 server drops distinctAttribute
            # where consumable capacity is off, then refuses what is left).
            raise ClaimError(f"{where}.matchAttribute", "Required value: the API server refuses a constraint with "
                                                        "neither matchAttribute nor distinctAttribute")
        constraints.append(c)
    return ClaimSpec(requests, constraints)


def from_v1beta1(spec: dict) -> dict:
    """v1beta1 put request fields at the top level; v1 wraps them in `exactly`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices") or {}, dict) or \
            not isinstance((spec.get("devices") or {}).get("requests") or [], list):
        return spec  # parse_claim_spec names what is wrong
    devices = dict(spec.get("devices") or {})
    out = []
    for raw in devices.get("requests") or []:
        if isinstance(raw, dict) and "exactly" not in raw and "firstAvailable" not in raw:
            body = {k: v for k, v in raw.items() if k != "name"}
            out.append({"name": raw.get("name"), "exactly": body})
        else:
            out.append(raw)
    devices["requests"] = out
    return {**(spec or {}), "devices": devices}


def claim_spec(obj: dict) -> tuple[dict, str]:
    """The claim spec of a ResourceClaim or ResourceClaimTemplate in v1 shape, and its field path."""
    spec = obj.get("spec") or {}
    prefix = "spec"
    if obj.get("kind") == "ResourceClaimTemplate":
        spec, prefix = (spec.get("spec") or {}) if isinstance(spec, dict) else spec, "spec.spec"
    if obj.get("apiVersion") == "resource.k8s.io/v1beta1":
        spec = from_v1beta1(spec)
    return spec, prefix


def parse_claim_object(obj: dict) -> ClaimSpec:
    """A whole ResourceClaim or ResourceClaimTemplate object; ClaimError names what is wrong."""
    if obj.get("apiVersion") not in SUPPORTED_VERSIONS:
        raise ClaimError("apiVersion", f"{obj.get('apiVersion')!r} is not supported")
    spec, prefix = claim_spec(obj)
    return parse_claim_spec(spec, prefix)
