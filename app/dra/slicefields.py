"""What one ResourceSlice says, field by field, in the index's terms: a device's identity apart
from its shape, its blocking taints, capacity policies and amounts, counter consumption, MIG
placement; a slice's pool key, generation and slice count. Pure."""

from __future__ import annotations


from app.common import parse_quantity

IDENTITY_ATTRIBUTES = frozenset({"uuid", "index", "minor", "pciBusID", "pcieRoot", "parentUUID", "parentIndex",
                                 "parentMinor", "numaNode"})


def split_identity(variable: dict) -> tuple[dict, dict]:
    attributes: dict = {}
    identity: dict = {}
    for domain, names in variable["attributes"].items():
        attributes[domain] = {}
        for name, value in names.items():
            if name in IDENTITY_ATTRIBUTES:
                identity[(domain, name)] = value
            else:
                attributes[domain][name] = value
    return {**variable, "attributes": attributes}, identity


def blocking_taints(raw) -> tuple:
    """Taints that keep a device from being allocated unless tolerated: NoSchedule and NoExecute
    (upstream ignores None and unknown effects)."""
    if not isinstance(raw, list):
        return ()
    return tuple(sorted((str(t.get("key", "")), str(t.get("value", "")), t["effect"]) for t in raw
                        if isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")))


def policy(raw) -> dict | None:
    """A capacity's requestPolicy with quantities parsed (default, validValues, validRange)."""
    if not isinstance(raw, dict):
        return None
    out: dict = {}
    if raw.get("default") is not None:
        out["default"] = parse_quantity(raw["default"])
    if raw.get("validValues"):
        out["validValues"] = [parse_quantity(v) for v in raw["validValues"]]
    if isinstance(raw.get("validRange"), dict):
        out["validRange"] = {k: parse_quantity(v) for k, v in raw["validRange"].items()
                             if k in ("min", "max", "step") and v is not None}
    return out


def capacity(raw) -> dict:
    out = {}
    for name, cap in (raw or {}).items():
        if isinstance(cap, dict):
            out[name] = (parse_quantity(cap.get("value")), policy(cap.get("requestPolicy")))
    return out


def consumes(raw) -> tuple:
    out = []
    for use in raw or ():
        if not isinstance(use, dict):
            raise ValueError("consumesCounters entries must be objects")
        counters = tuple(sorted((name, parse_quantity((c or {}).get("value")))
                                for name, c in (use.get("counters") or {}).items()))
        out.append((str(use.get("counterSet", "")), counters))
    return tuple(out)


def placement(raw: dict) -> tuple | None:
    if raw.get("nodeName"):
        return ("name", raw["nodeName"])
    if raw.get("allNodes"):
        return ("all",)
    if raw.get("nodeSelector") is not None:
        return ("selector", raw["nodeSelector"])
    return ("none",)


def pool_key(s: dict) -> tuple:
    """(driver, pool name) of a slice (as kept or as served)."""
    spec = s["spec"]
    return (spec.get("driver"), (spec.get("pool") or {}).get("name"))


def generation(s: dict) -> int:
    return int((s["spec"].get("pool") or {}).get("generation", 0) or 0)


def slice_count(s: dict) -> int:
    return int((s["spec"].get("pool") or {}).get("resourceSliceCount", 1) or 0)


def trusted_slices(slices: list[dict]) -> list[dict]:
    """The slices the scheduler allocates from: per pool, those of its newest generation, and only
    when all resourceSliceCount of them are there (upstream's GatherPools: an incomplete pool
    serves nothing until its driver has published the rest)."""
    pools: dict[tuple, list[dict]] = {}
    for s in slices:
        pools.setdefault(pool_key(s), []).append(s)
    trusted = []
    for members in pools.values():
        newest = max(generation(s) for s in members)
        current = [s for s in members if generation(s) == newest]
        if len(current) == slice_count(current[0]):
            trusted += current
    return trusted
