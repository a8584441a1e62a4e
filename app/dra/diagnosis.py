"""A verdict, and why no node can take a claim: devices in use now, or never (the request
nothing matches with its closest devices, or the node that comes nearest). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import search
from .claims import ClaimSpec, Request
from .index import Index
from .selection import Selection
from .units import Units

SEARCH_BUDGET = search.DEFAULT_BUDGET


@dataclass
class Verdict:
    status: str  # satisfiable | unsatisfiable-now | never | invalid
    message: str = ""
    nodes: int = 0
    example_node: str | None = None
    failed_request: str | None = None
    closest: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # path: message of CEL problems
    notes: list[str] = field(default_factory=list)  # what the verdict assumed or waits for


def unsatisfiable(spec: ClaimSpec, index: Index, selection: Selection, undecided: int, notes: list,
                   count_nodes: bool, decide) -> Verdict:
    """Why no node can take the claim now: the search ran out, devices are in use, or never."""
    if undecided:
        return Verdict("unsatisfiable-now", f"not decided: the search for {undecided} node(s) went past "
                       f"{SEARCH_BUDGET} device attempts", notes=notes)
    ever_nodes, ever_example, _errors, _undecided, _binding = decide(now=False)
    if ever_nodes:
        where = f"on {ever_nodes} node(s) (e.g. {ever_example})" if count_nodes else f"(e.g. on node {ever_example})"
        return Verdict("unsatisfiable-now", f"devices exist {where} but are allocated, their counters or capacity "
                       f"are in use, or their pool is incomplete{_incomplete(index)}", notes=notes)
    verdict = never(spec, index, selection)
    verdict.notes = notes
    return verdict


def _incomplete(index: Index) -> str:
    """The incomplete pools by name: the scheduler allocates nothing from them until the driver
    has published every slice."""
    if not index.incomplete_pools:
        return ""
    named = [f"{driver}/{pool} ({why})" for (driver, pool), why in sorted(index.incomplete_pools.items())[:3]]
    more = len(index.incomplete_pools) - len(named)
    return f"; incomplete pools: {'; '.join(named)}{f' and {more} more' if more > 0 else ''}"


def _bytes(amount: int) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if amount >= size and amount % size == 0:
            return f"{amount // size}{unit}"
    return f"{amount / 2**30:.1f}Gi" if amount >= 2**30 else str(amount)


def _describe(index: Index, shape: int) -> str:
    v = index.shapes[shape]
    attrs = v["attributes"].get(v["driver"], {})
    for domain in v["attributes"].values():
        attrs = {**domain, **attrs}
    label = attrs.get("productName") or v["driver"]
    kind = attrs.get("type")
    profile = attrs.get("profile")
    memory = (v["capacity"].get(v["driver"]) or {}).get("memory")
    parts = [str(label)] + ([f"type {kind}"] if kind else []) + ([f"profile {profile}"] if profile else [])
    if memory:
        parts.append(f"memory {_bytes(int(float(memory['_quantity'])))}")
    return ", ".join(parts)


def never(spec: ClaimSpec, index: Index, selection: Selection) -> Verdict:
    """Why no node can ever hold the claim: the first request nothing matches (with the closest
    shapes), or the node that comes nearest."""
    for alternatives in spec.requests:
        if any(_matching(index, selection, req) for req in alternatives):
            if not any(_matching(index, selection, req, with_capacity=True) for req in alternatives):
                return _no_capacity(alternatives[0], index, selection)
            continue
        req = alternatives[0]
        if req.device_class not in index.classes:
            return Verdict("never", f"{req.path}.deviceClassName: DeviceClass {req.device_class!r} does not exist",
                           failed_request=req.name)
        scored = []
        for shape, members in enumerate(index.shape_members):
            if members:
                failed = selection.failed_parts(req, members[0])
                scored.append((len(failed), shape, failed, len(members)))
        scored.sort()
        # Shapes that differ only where a user does not look (MIG placements' memory slices,
        # our index attributes) are one kind of device to them: counted together.
        kinds: dict[tuple, int] = {}
        for _k, shape, failed, count in scored:
            key = (_describe(index, shape), tuple(failed))
            kinds[key] = kinds.get(key, 0) + count
        closest = [f"{text} ({n} devices): fails {', '.join(f)}" for (text, f), n in list(kinds.items())[:3]]
        first_fail = scored[0][2][0] if scored and scored[0][2] else "its selectors"
        return Verdict("never", f"request {req.name}: no device matches ({first_fail})", failed_request=req.name,
                       closest=closest)
    best = []
    passing: dict = {}
    units = Units(index, spec, selection)
    for gi, (nodes, view) in enumerate(index.groups()):
        counts, tainted = [], []
        for alts in spec.requests:
            most, blocked = 0, 0
            for r in alts:
                have, held = 0, 0
                for shape, _state, n in units.histogram(gi, view):
                    if (r.path, shape) not in passing:
                        passing[(r.path, shape)] = not selection.failed_parts(r, index.shape_members[shape][0])
                    if passing[(r.path, shape)]:
                        have += n
                        if any(not search.tolerated(r.tolerations, t) for t in index.shape_taints[shape]):
                            held += n
                if have > most:
                    most, blocked = have, held
            counts.append(most)
            tainted.append(blocked)
        best.append((sum(counts), nodes[0], counts, tainted))
    best.sort(key=lambda b: (-b[0], b[1]))
    wanted = [alts[0].count if alts[0].mode == "ExactCount" else "all" for alts in spec.requests]
    _total, node, counts, tainted = best[0] if best else (0, None, [], [])
    names = [alts[0].name for alts in spec.requests]
    detail = ", ".join(f"{n}: {c} matching (needs {w})" + (f", {t} of them tainted" if t else "")
                       for n, c, w, t in zip(names, counts, wanted, tainted))
    return Verdict("never", f"no single node can hold all requests with their constraints, taints, counters and "
                   f"capacity; best node {node}: {detail}", closest=[detail])


def _matching(index: Index, selection: Selection, req: Request, with_capacity: bool = False) -> bool:
    """Does any device pass the request's selectors (and, with_capacity, have room for its
    capacity requests on an empty device)?"""
    if req.device_class not in index.classes:
        return False

    def fits(p: int) -> bool:
        if selection.failed_parts(req, p):
            return False
        return not with_capacity or search.capacity_fits(req.capacity, index.shape_capacity[index.devices[p].shape])

    if any(r is not None and r.per_device for _l, r in selection.parts[req.path]):
        return any(fits(p) for members in index.shape_members for p in members)  # live devices only
    return any(members and fits(members[0]) for members in index.shape_members)


def candidates(index: Index, req: Request) -> list[int]:
    """Positions of the live devices that pass the request's class and own selectors (a
    selector that does not compile or errors on a device: not passed)."""
    if req.device_class not in index.classes:
        return []
    selection = Selection(index)
    selection.prepare(req)
    if any(results is None for _l, results in selection.parts[req.path]):
        return []
    return [p for members in index.shape_members for p in members if not selection.failed_parts(req, p)]


def _no_capacity(req: Request, index: Index, selection: Selection) -> Verdict:
    asked = ", ".join(f"{name} {amount}" for name, amount in sorted((req.capacity or {}).items()))
    seen = []
    for shape, members in enumerate(index.shape_members):
        if members and not selection.failed_parts(req, members[0]):
            capacity = index.shape_capacity[shape]
            have = ", ".join(f"{name} {value}" for name, (value, _p) in sorted(capacity.items())) or "no capacities"
            seen.append(f"{_describe(index, shape)} ({len(members)} devices): has {have}")
    return Verdict("never", f"request {req.name}: no matching device has room for its capacity requests ({asked})",
                   failed_request=req.name, closest=seen[:3])
