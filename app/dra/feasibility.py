"""Can the devices in an Index satisfy a claim? Pure.

Each group of interchangeable nodes is decided once by the exact search (search.py), first as
things are now (allocated devices, consumed counters and capacity, incomplete pools), then as
they could be once those free up. Selector results are computed per device shape, lazily, in the
order the search asks for them, and kept in the index across checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import cel, search
from .claims import ClaimSpec, Request
from .index import IDENTITY_ATTRIBUTES, Index

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNKNOWN = object()
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


def _mentions_identity(expression: str) -> bool:
    return any(word in IDENTITY_ATTRIBUTES for word in _WORD.findall(expression))


class _Results:
    """One expression's outcome per shape (or per device when it reads identity attributes):
    True, False or the runtime error text; evaluated on first use."""

    def __init__(self, selector, index: Index):
        self.selector, self.index = selector, index
        self.per_device = _mentions_identity(selector.expression)
        self.values: list = [_UNKNOWN] * (len(index.devices) if self.per_device else len(index.shapes))

    def at(self, p: int):
        slot = p if self.per_device else self.index.devices[p].shape
        value = self.values[slot]
        if value is _UNKNOWN:
            variable = self.index.devices[p].variable if self.per_device else self.index.shapes[slot]
            try:
                value = self.selector.matches(variable)
            except cel.CelError as exc:
                value = str(exc)
            self.values[slot] = value
        return value


class _Selection:
    """Does a device pass a request's class selectors and then its own, in upstream's order
    (the first false stops; a runtime error aborts the node)?"""

    def __init__(self, index: Index):
        self.index = index
        self.errors: list[str] = []
        self.parts: dict[str, list[tuple[str, _Results]]] = {}  # request path -> (label, results)

    def results(self, expr: str, path: str) -> _Results | None:
        try:
            selector = cel.compile_selector(expr)
        except cel.CelError as exc:
            self.errors.append(f"{path}: {exc}")
            return None
        cache = self.index.selector_cache
        if expr not in cache:
            if len(cache) >= 10_000:
                cache.clear()
            cache[expr] = _Results(selector, self.index)
        return cache[expr]

    def prepare(self, req: Request) -> None:
        parts = []
        device_class = self.index.classes.get(req.device_class)
        if device_class is not None:
            for i, sel in enumerate((device_class.get("spec") or {}).get("selectors") or []):
                expr = ((sel or {}).get("cel") or {}).get("expression", "")
                results = self.results(expr, f"deviceclasses/{req.device_class}.spec.selectors[{i}]")
                parts.append((f"DeviceClass {req.device_class} selector {i}", results))
        for i, expr in enumerate(req.selectors):
            results = self.results(expr, f"{req.path}.selectors[{i}].cel.expression")
            parts.append((f"{req.path}.selectors[{i}] `{_short(expr)}`", results))
        self.parts[req.path] = parts

    @property
    def per_device(self) -> bool:
        return any(r is not None and r.per_device for parts in self.parts.values() for _l, r in parts)

    def __call__(self, req: Request, p: int) -> bool:
        for i, (label, results) in enumerate(self.parts[req.path]):
            value = results.at(p)
            if value is True:
                continue
            if value is False:
                return False
            raise search.AllocationError(f"{label} on device {'/'.join(map(str, self.index.devices[p].key))}: "
                                         f"CEL runtime error: {value}")
        return True

    def failed_parts(self, req: Request, p: int) -> list[str]:
        """Labels of the selectors device p does not pass (a runtime error counts as failing)."""
        return [label for label, results in self.parts[req.path] if results.at(p) is not True]

    def pattern(self, view, reqs: list[Request]) -> tuple:
        """Per-device selector outcomes on a node's devices: nodes with equal patterns (and equal
        views) are decided alike."""
        out = []
        for pool in view:
            for p in pool.devices:
                out.append(tuple(results.at(p) for req in reqs for _l, results in self.parts[req.path]
                                 if results.per_device))
        return tuple(out)


def _constraint_pattern(view, index: Index, attrs: list[str]) -> tuple:
    """Constraint attribute values on a node's devices, relabelled by first appearance: only
    equality within a node matters."""
    labels: dict = {}
    out = []
    for pool in view:
        for p in pool.devices:
            device = index.devices[p]
            row = []
            for i, attr in enumerate(attrs):
                value = search.match_key(device.attribute(attr))
                row.append(None if value is None else labels.setdefault((i, value), len(labels)))
            out.append(tuple(row))
    return tuple(out)


def _units(index: Index, spec: ClaimSpec, selection: _Selection):
    """(nodes, view) per set of nodes the claim cannot tell apart."""
    attrs = [c.get("matchAttribute") or c.get("distinctAttribute") for c in spec.constraints]
    attrs = [a for a in attrs if isinstance(a, str)]
    per_device = selection.per_device
    reqs = [r for alts in spec.requests for r in alts]
    for nodes, view in index.groups():
        if not attrs and not per_device:
            yield nodes, view
            continue
        refined: dict[tuple, list[str]] = {}
        for node in nodes:
            node_view = index.views[node]
            key = (_constraint_pattern(node_view, index, attrs) if attrs else (),
                   selection.pattern(node_view, reqs) if per_device else ())
            refined.setdefault(key, []).append(node)
        for members in refined.values():
            yield members, index.views[members[0]]


def check(spec: ClaimSpec, index: Index) -> Verdict:
    selection = _Selection(index)
    for alternatives in spec.requests:
        for req in alternatives:
            selection.prepare(req)
    if selection.errors:
        return Verdict("invalid", selection.errors[0], errors=selection.errors)
    notes = []
    if not index.node_labels_known and index.selector_slices:
        notes.append("no Node objects in the inventory: slices with a nodeSelector are taken as reachable from "
                     "every node")

    def decide(now: bool):
        count, example, errors, undecided, binding = 0, None, [], 0, False
        for nodes, view in _units(index, spec, selection):
            try:
                outcome = search.allocate(spec, view, index, selection, now, selection.per_device, SEARCH_BUDGET)
            except search.BudgetExceeded:
                undecided += len(nodes)
                continue
            if outcome.status == "ok":
                count += len(nodes)
                example = example or nodes[0]
                binding = binding or outcome.binding
            elif outcome.status == "error":
                errors.append((nodes[0], outcome.message))
        return count, example, errors, undecided, binding

    nodes, example, errors, undecided, binding = decide(now=True)
    if binding:
        notes.append("the devices have binding conditions: the pod waits until the driver reports them ready")
    if nodes:
        return Verdict("satisfiable", f"satisfiable on {nodes} node(s), e.g. {example}", nodes, example,
                       notes=notes)
    if errors:
        node, message = errors[0]
        return Verdict("invalid", f"the scheduler would stop with an error (on node {node}): {message}", notes=notes)
    if undecided:
        return Verdict("unsatisfiable-now", f"not decided: the search for {undecided} node(s) went past "
                       f"{SEARCH_BUDGET} device attempts", notes=notes)
    ever_nodes, ever_example, _errors, _undecided, _binding = decide(now=False)
    if ever_nodes:
        return Verdict("unsatisfiable-now", f"devices exist on {ever_nodes} node(s) (e.g. {ever_example}) but are "
                       "allocated, their counters or capacity are in use, or their pool is incomplete", notes=notes)
    verdict = _never(spec, index, selection)
    verdict.notes = notes
    return verdict


def _bytes(amount: int) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if amount >= size and amount % size == 0:
            return f"{amount // size}{unit}"
    return f"{amount / 2**30:.1f}Gi" if amount >= 2**30 else str(amount)


def _short(expr: str, limit: int = 70) -> str:
    expr = " ".join(expr.split())
    return expr if len(expr) <= limit else expr[: limit - 3] + "..."


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


def _never(spec: ClaimSpec, index: Index, selection: _Selection) -> Verdict:
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
        closest = [f"{_describe(index, s)} ({n} devices): fails {', '.join(f)}" for _k, s, f, n in scored[:3]]
        first_fail = scored[0][2][0] if scored and scored[0][2] else "its selectors"
        return Verdict("never", f"request {req.name}: no device matches ({first_fail})", failed_request=req.name,
                       closest=closest)
    best = []
    for nodes, view in index.groups():
        positions = [p for pool in view for p in pool.devices]
        counts = [max(sum(1 for p in positions if not selection.failed_parts(r, p)) for r in alts)
                  for alts in spec.requests]
        best.append((sum(counts), nodes[0], counts))
    best.sort(key=lambda b: (-b[0], b[1]))
    wanted = [alts[0].count if alts[0].mode == "ExactCount" else "all" for alts in spec.requests]
    _total, node, counts = best[0] if best else (0, None, [])
    names = [alts[0].name for alts in spec.requests]
    detail = ", ".join(f"{n}: {c} matching (needs {w})" for n, c, w in zip(names, counts, wanted))
    return Verdict("never", f"no single node can hold all requests with their constraints, taints, counters and "
                   f"capacity; best node {node}: {detail}", closest=[detail])


def _matching(index: Index, selection: _Selection, req: Request, with_capacity: bool = False) -> bool:
    """Does any device pass the request's selectors (and, with_capacity, have room for its
    capacity requests on an empty device)?"""
    if req.device_class not in index.classes:
        return False

    def fits(p: int) -> bool:
        if selection.failed_parts(req, p):
            return False
        return not with_capacity or search.capacity_fits(req.capacity, index.shape_capacity[index.devices[p].shape])

    if any(r.per_device for _l, r in selection.parts[req.path]):
        return any(fits(p) for p in range(len(index.devices)))
    return any(members and fits(members[0]) for members in index.shape_members)


def _no_capacity(req: Request, index: Index, selection: _Selection) -> Verdict:
    asked = ", ".join(f"{name} {amount}" for name, amount in sorted((req.capacity or {}).items()))
    seen = []
    for shape, members in enumerate(index.shape_members):
        if members and not selection.failed_parts(req, members[0]):
            capacity = index.shape_capacity[shape]
            have = ", ".join(f"{name} {value}" for name, (value, _p) in sorted(capacity.items())) or "no capacities"
            seen.append(f"{_describe(index, shape)} ({len(members)} devices): has {have}")
    return Verdict("never", f"request {req.name}: no matching device has room for its capacity requests ({asked})",
                   failed_request=req.name, closest=seen[:3])
