"""Can the devices in an Index satisfy a claim? Pure.

Per request: devices matching its DeviceClass selectors AND its own selectors. Then per node
(node-local devices plus devices reachable from every node): can all requests be given
distinct devices at once, honouring count, allocationMode All, firstAvailable,
matchAttribute and distinctAttribute? Nodes with the same device signature are decided once.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from dataclasses import dataclass, field

from . import cel
from .claims import ClaimSpec, Request
from .index import IDENTITY_ATTRIBUTES, Index

MAX_ALTERNATIVES = 64  # firstAvailable combinations tried per node
MAX_MATCH_VALUES = 256  # matchAttribute values tried per node
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Verdict:
    status: str  # satisfiable | unsatisfiable-now | never | invalid
    message: str = ""
    nodes: int = 0
    example_node: str | None = None
    failed_request: str | None = None
    closest: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # (path, message) of CEL problems


def _mentions_identity(expression: str) -> bool:
    return any(word in IDENTITY_ATTRIBUTES for word in _WORD.findall(expression))


@dataclass
class _Match:
    """Selector results per shape, or per device when the selector reads identity attributes."""

    per_device: bool
    values: list[bool]
    index: Index

    def holds(self, d: int) -> bool:
        return self.values[d] if self.per_device else self.values[self.index.devices[d].shape]


@dataclass
class _Candidates:
    parts: list[tuple[str, _Match]]  # (label, results) for class and request selectors

    def holds(self, d: int) -> bool:
        return all(m.holds(d) for _label, m in self.parts)

    def any(self, index: Index) -> bool:
        if all(not m.per_device for _l, m in self.parts):
            return any(members and self.holds(members[0]) for members in index.shape_members)
        return any(self.holds(d) for d in range(len(index.devices)))


class _Evaluator:
    def __init__(self, index: Index):
        self.index = index
        self.errors: list[str] = []
        # Results depend only on the index's (immutable) shapes: share them across checks.
        self._cache: dict[tuple, tuple[_Match, str | None]] = index.selector_cache

    def compiled(self, expr: str, path: str):
        try:
            return cel.compile_selector(expr)
        except cel.CelError as exc:
            self.errors.append(f"{path}: {exc}")
            return None

    def matches(self, expr: str, path: str, only: _Candidates | None = None) -> _Match | None:
        """Does `expr` hold, per shape or device? None when it does not compile. With `only`,
        targets outside it are not evaluated (the scheduler checks class selectors first)."""
        key = (expr, None if only is None else tuple(label for label, _m in only.parts))
        if key in self._cache:
            match, first_error = self._cache[key]
            if first_error:
                self.errors.append(f"{path}: runtime error on some devices: {first_error}")
            return match
        selector = self.compiled(expr, path)
        if selector is None:
            return None
        per_device = _mentions_identity(expr)
        index = self.index
        count = len(index.devices) if per_device else len(index.shapes)
        values = []
        first_error = None
        for position in range(count):
            if per_device:
                wanted = only is None or only.holds(position)
            else:
                members = index.shape_members[position]
                wanted = bool(members) and (only is None or only.holds(members[0]))
            if not wanted:
                values.append(False)
                continue
            variable = index.devices[position].variable if per_device else index.shapes[position]
            try:
                values.append(selector.matches(variable))
            except cel.CelError as exc:
                values.append(False)  # the scheduler would report it; the device does not match
                first_error = first_error or str(exc)
        if first_error:
            self.errors.append(f"{path}: runtime error on some devices: {first_error}")
        match = _Match(per_device, values, index)
        if len(self._cache) < 10_000:
            self._cache[key] = (match, first_error)
        return match

    def candidates(self, req: Request) -> _Candidates | None:
        """Devices matching class and request selectors; None when the class does not exist."""
        device_class = self.index.classes.get(req.device_class)
        if device_class is None:
            return None
        class_parts, request_parts = [], []
        for i, sel in enumerate((device_class.get("spec") or {}).get("selectors") or []):
            expr = ((sel or {}).get("cel") or {}).get("expression", "")
            class_parts.append((f"DeviceClass {req.device_class} selector {i}", expr,
                                f"deviceclasses/{req.device_class}.spec.selectors[{i}]"))
        for i, expr in enumerate(req.selectors):
            request_parts.append((f"{req.path}.selectors[{i}] `{_short(expr)}`", expr,
                                  f"{req.path}.selectors[{i}].cel.expression"))
        out = _Candidates([])
        for label, expr, path in class_parts:
            match = self.matches(expr, path)
            if match is None:
                return _Candidates([("does not compile", _Match(False, [False] * len(self.index.shapes), self.index))])
            out.parts.append((label, match))
        passing = _Candidates(list(out.parts)) if out.parts else None
        for label, expr, path in request_parts:
            match = self.matches(expr, path, passing)
            if match is None:
                return _Candidates([("does not compile", _Match(False, [False] * len(self.index.shapes), self.index))])
            out.parts.append((label, match))
        return out


def _max_flow(requests: list[tuple[int, set[int]]], distinct_groups: dict[int, object] | None) -> bool:
    """Give each request its count of distinct devices; distinct_groups maps device -> value that may
    be used at most once (distinctAttribute)."""
    need = sum(c for c, _ in requests)
    graph: dict = {}

    def edge(a, b, cap):
        graph.setdefault(a, {})[b] = graph.get(a, {}).get(b, 0) + cap
        graph.setdefault(b, {}).setdefault(a, 0)

    for r, (count, devices) in enumerate(requests):
        edge("s", ("r", r), count)
        for d in devices:
            edge(("r", r), ("d", d), 1)
    values_linked = set()
    for d in set().union(*[devs for _c, devs in requests]) if requests else ():
        if distinct_groups is not None and d in distinct_groups:
            value = ("v", repr(distinct_groups[d]))
            edge(("d", d), value, 1)
            if value not in values_linked:  # each value may be used once
                edge(value, "t", 1)
                values_linked.add(value)
        else:
            edge(("d", d), "t", 1)
    flow = 0
    while flow < need:
        parent = {"s": None}
        queue = deque(["s"])
        while queue and "t" not in parent:
            u = queue.popleft()
            for v, cap in graph.get(u, {}).items():
                if cap > 0 and v not in parent:
                    parent[v] = u
                    queue.append(v)
        if "t" not in parent:
            return False
        v = "t"
        while parent[v] is not None:
            u = parent[v]
            graph[u][v] -= 1
            graph[v][u] += 1
            v = u
        flow += 1
    return True


def tolerates(tolerations: tuple, taint: tuple) -> bool:
    """Does one of the request's tolerations tolerate this (key, value, effect) taint? (upstream:
    an empty effect or key matches all; Exists matches any value, Equal the same value)."""
    key, value, effect = taint
    for t_key, operator, t_value, t_effect in tolerations:
        if t_effect and t_effect != effect:
            continue
        if t_key and t_key != key:
            continue
        if operator == "Exists" or (operator == "Equal" and t_value == value):
            return True
    return False


def match_key(value) -> tuple | None:
    """What matchAttribute / distinctAttribute compare: type and value, so bool true never equals
    int 1 and versions compare by their text (upstream); None (no attribute, a list) never matches."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, dict) and len(value) == 1:
        return ("version", next(iter(value.values())))
    return None


def _fits(chosen: list[Request], cands: list[set[int]], constraints: list[dict], index: Index, usable) -> bool:
    """`cands`: per chosen request, its matching devices reachable from this node."""
    local = []
    for req, devs in zip(chosen, cands):
        mine = {d for d in devs if usable(d, req)}
        if req.mode == "All":
            everything = devs
            if not everything or mine != everything:
                return False  # All needs every matching device, none taken
            local.append((len(mine), mine))
        else:
            local.append((req.count, mine))
    names = [r.name.split("/")[0] for r in chosen]
    match_attrs, distinct = [], None
    for c in constraints:
        members = [i for i, n in enumerate(names) if not c.get("requests") or n in c["requests"]
                   or any(n == q.split("/")[0] for q in c.get("requests") or [])]
        if c.get("matchAttribute"):
            match_attrs.append((c["matchAttribute"], members))
        elif c.get("distinctAttribute"):
            distinct = (c["distinctAttribute"], members)
    def keys(attr, members):
        # Computed once per constraint: Device.flat builds a dict on every access.
        return {d: match_key(index.devices[d].flat.get(attr)) for i in members for d in local[i][1]}

    distinct_groups = None
    if distinct:
        attr, members = distinct
        distinct_groups = {d: k for d, k in keys(attr, members).items() if k is not None}
        for i in members:
            count, devs = local[i]
            local[i] = (count, {d for d in devs if d in distinct_groups})
    if not match_attrs:
        return _max_flow(local, distinct_groups)
    match_keys = [keys(attr, members) for attr, members in match_attrs]
    value_sets = [sorted(set(k.values()) - {None}, key=repr)[:MAX_MATCH_VALUES] for k in match_keys]
    for combo in itertools.islice(itertools.product(*value_sets), MAX_MATCH_VALUES):
        narrowed = list(local)
        for (_attr, members), device_keys, value in zip(match_attrs, match_keys, combo):
            for i in members:
                count, devs = narrowed[i]
                narrowed[i] = (count, {d for d in devs if device_keys[d] == value})
        if _max_flow(narrowed, distinct_groups):
            return True
    return False


def _signature(reachable: list[int], index: Index, attrs: list[str], per_device: bool) -> tuple:
    if per_device:
        return tuple(reachable)  # identity matters: no grouping
    rows = []
    for d in reachable:
        dev = index.devices[d]
        rows.append((dev.shape, dev.key in index.allocated, dev.complete_pool,
                     tuple(repr(dev.flat.get(a)) for a in attrs)))
    rows.sort()
    # Relabel constraint values by first appearance: only equality within a node matters.
    labels: dict = {}
    out = []
    for shape, taken, complete, values in rows:
        out.append((shape, taken, complete, tuple(labels.setdefault((i, v), len(labels)) for i, v in enumerate(values))))
    return tuple(out)


def check(spec: ClaimSpec, index: Index) -> Verdict:
    ev = _Evaluator(index)
    cands: list[list[_Candidates]] = []
    for alternatives in spec.requests:
        row = []
        for req in alternatives:
            found = ev.candidates(req)
            if found is None:
                return Verdict("never", f"{req.path}.deviceClassName: DeviceClass {req.device_class!r} does not exist",
                               failed_request=req.name, errors=ev.errors)
            row.append(found)
        cands.append(row)
    if ev.errors and any("runtime error" not in e for e in ev.errors):
        return Verdict("invalid", ev.errors[0], errors=ev.errors)
    attrs = [a for a in (c.get("matchAttribute") or c.get("distinctAttribute") for c in spec.constraints) if a]
    per_device = any(m.per_device for row in cands for c in row for _l, m in c.parts)
    combos = list(itertools.islice(itertools.product(*[range(len(a)) for a in spec.requests]), MAX_ALTERNATIVES))

    def units():
        if not attrs and not per_device:
            yield from index.groups()  # interchangeable nodes decided once
            return
        for node, reachable in index.locations():
            yield [node], reachable

    def decide(usable) -> tuple[int, str | None]:
        seen: dict[tuple, bool] = {}
        count, example = 0, None
        for nodes, reachable in units():
            sig = _signature(reachable, index, attrs, per_device) if (attrs or per_device) else None
            fits = seen.get(sig) if sig is not None else None
            if fits is None:
                local = [[{d for d in reachable if c.holds(d)} for c in row] for row in cands]
                fits = any(_fits([alts[i] for alts, i in zip(spec.requests, combo)],
                                 [row[i] for row, i in zip(local, combo)], spec.constraints, index, usable)
                           for combo in combos)
                if sig is not None:
                    seen[sig] = fits
            if fits:
                count += len(nodes)
                example = example or nodes[0]
        return count, example

    def untainted(d, req):
        taints = index.shape_taints[index.devices[d].shape]
        return not taints or all(tolerates(req.tolerations, taint) for taint in taints)

    def now(d, req):
        dev = index.devices[d]
        return dev.complete_pool and (req.admin or dev.key not in index.allocated) and untainted(d, req)

    nodes, example = decide(now)
    if nodes:
        return Verdict("satisfiable", f"satisfiable on {nodes} node(s), e.g. {example}", nodes, example,
                       errors=ev.errors)
    ever_nodes, ever_example = decide(untainted)
    if ever_nodes:
        return Verdict("unsatisfiable-now", f"devices exist on {ever_nodes} node(s) (e.g. {ever_example}) but are "
                       "allocated or their pool is incomplete", errors=ev.errors)
    return _never(spec, cands, index, ev, units)


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


def _never(spec: ClaimSpec, cands, index: Index, ev: _Evaluator, units) -> Verdict:
    for alternatives, row in zip(spec.requests, cands):
        if not any(c.any(index) for c in row):
            req, results = alternatives[0], row[0].parts
            scored = []
            for shape, members in enumerate(index.shape_members):
                if not members:
                    continue
                failed = [label for label, m in results if not m.holds(members[0])]
                scored.append((len(failed), shape, failed, len(members)))
            scored.sort()
            closest = [f"{_describe(index, s)} ({n} devices): fails {', '.join(f)}" for _k, s, f, n in scored[:3]]
            first_fail = scored[0][2][0] if scored and scored[0][2] else "its selectors"
            return Verdict("never", f"request {req.name}: no device matches ({first_fail})", failed_request=req.name,
                           closest=closest, errors=ev.errors)
    # Each request matches something, but never all together on one node.
    best = []
    for nodes, reachable in units():
        counts = [max(sum(1 for d in reachable if c.holds(d)) for c in row) for row in cands]
        best.append((sum(counts), nodes[0], counts))
    best.sort(key=lambda b: (-b[0], b[1]))
    wanted = [alts[0].count if alts[0].mode == "ExactCount" else "all" for alts in spec.requests]
    _total, node, counts = best[0] if best else (0, None, [])
    names = [alts[0].name for alts in spec.requests]
    detail = ", ".join(f"{n}: {c} matching (needs {w})" for n, c, w in zip(names, counts, wanted))
    return Verdict("never", f"no single node can hold all requests with their constraints; best node {node}: {detail}",
                   failed_request=None, closest=[detail], errors=ev.errors)
