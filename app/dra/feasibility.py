"""Can the devices in an Index satisfy a claim? Pure.

Each group of interchangeable nodes is decided once by the exact search (search.py), first as
things are now (allocated devices, consumed counters and capacity, incomplete pools), then as
they could be once those free up. Selector results are computed per device shape, lazily, in the
order the search asks for them, and kept in the index across checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.common import deadline

from . import cel, search
from .claims import ClaimSpec, Request, parse_claim_spec
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
        # The lists live-index snapshots share, not the snapshot: a cached result must not keep
        # an old snapshot (its views, groups) alive.
        self.selector, self.devices, self.shapes = selector, index.devices, index.shapes
        self.per_device = _mentions_identity(selector.expression)
        self.values: list = [_UNKNOWN] * (len(index.devices) if self.per_device else len(index.shapes))
        self.by_reads: dict = {}  # what the expression reads of a device -> its outcome

    def at(self, p: int):
        slot = p if self.per_device else self.devices[p].shape
        if slot >= len(self.values):  # an incremental update appended devices or shapes
            self.values.extend([_UNKNOWN] * (slot + 1 - len(self.values)))
        value = self.values[slot]
        if value is _UNKNOWN:
            key = _projection(self.devices, self.shapes, p, self.selector.reads) \
                if self.selector.reads is not None else None
            value = self.by_reads.get(key, _UNKNOWN) if key is not None else _UNKNOWN
            if value is _UNKNOWN:
                variable = self.devices[p].variable if self.per_device else self.shapes[slot]
                deadline.check()
                try:
                    value = self.selector.matches(variable)
                except cel.CelError as exc:
                    value = str(exc)
                if key is not None:
                    self.by_reads[key] = value
            self.values[slot] = value
        return value


_MISSING = "\0missing"


def _projection(devices: list, shapes: list, p: int, reads: tuple) -> tuple:
    """The values of the fields an expression reads, for device p: devices equal there get the
    same outcome, so it is computed once (most selectors read one or two attributes)."""
    device = devices[p]
    shape = shapes[device.shape]
    out = []
    for read in reads:
        if len(read) == 1:
            out.append(repr(shape.get(read[0])))
            continue
        kind, domain, name = read
        value = device.identity.get((domain, name), _MISSING) if kind == "attributes" else _MISSING
        if value is _MISSING:
            value = shape[kind].get(domain, {}).get(name, _MISSING)
        out.append(repr(value))
    return tuple(out)


class _Selection:
    """Does a device pass a request's class selectors and then its own, in upstream's order
    (the first false stops; a runtime error aborts the node)?"""

    def __init__(self, index: Index):
        self.index = index
        self.errors: list[str] = []
        self.parts: dict[str, list[tuple[str, _Results]]] = {}  # request path -> (label, results)
        self._per_device: bool | None = None

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
        if self._per_device is None:
            self._per_device = any(r is not None and r.per_device for parts in self.parts.values() for _l, r in parts)
        return self._per_device

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


def _constraint_pattern(view, index: Index, attrs: list[str], ordered: bool) -> tuple:
    """Constraint attribute values on a node's devices, each replaced by its rank on that node
    (only equality within a node matters), beside each device's state: which devices are held
    matters too (two nodes equal but for which NUMA node's GPU is allocated are not equal for a
    matchAttribute on numaNode). Unordered: the rows as a sorted multiset."""
    rows, pools = [], []
    for pool in view:
        pools.append(tuple(sorted((k, tuple(sorted(v.items()))) for k, v in pool.allocated_use.items())))
        for p in pool.devices:
            device = index.devices[p]
            state = (device.key in index.allocated, device.key in index.shared_in_use,
                     tuple(sorted(index.allocated_capacity.get(device.key, {}).items())), device.consumes)
            rows.append((device.shape, state, tuple(search.match_key(device.attribute(a)) for a in attrs)))
    ranks = [{v: i for i, v in enumerate(sorted({r[2][k] for r in rows} - {None}, key=repr))}
             for k in range(len(attrs))]
    out = [(shape, state, tuple(None if v is None else ranks[k][v] for k, v in enumerate(values)))
           for shape, state, values in rows]
    return (tuple(out if ordered else sorted(out, key=repr)), tuple(pools if ordered else sorted(pools, key=repr)))


class _Units:
    """The sets of nodes one search decides for this claim. Nodes in one canonical group hold the
    same devices; their order matters only where an error can stop upstream's search first (a
    CEL runtime error, a constraint on allocationMode All, the 32-device limit): such groups are
    split by their exact order."""

    def __init__(self, index: Index, spec: ClaimSpec, selection: _Selection, skip: frozenset = frozenset()):
        """skip: nodes left out (the shadow nodes, when only what can be allocated counts)."""
        self.index, self.spec, self.selection, self.skip = index, spec, selection, skip
        attrs = [c.get("matchAttribute") or c.get("distinctAttribute") for c in spec.constraints]
        self.attrs = tuple(a for a in attrs if isinstance(a, str))
        self.reqs = [r for alts in spec.requests for r in alts]
        constrained_all = any(r.mode == "All" and any(search.applies(c.get("requests") or (), r) for c in spec.constraints) for r in self.reqs)
        near_limit = sum(max(r.count for r in alts) for alts in spec.requests) > search.MAX_DEVICES_PER_CLAIM
        self.order_matters = constrained_all or near_limit or selection.per_device
        self.erring: dict[int, bool] = {}  # shape -> can stop the search with an error

    def _group_shapes(self, gi: int, view) -> list[int]:
        shapes = self.index.group_cache.shapes
        if gi not in shapes:
            shapes[gi] = sorted({self.index.devices[p].shape for pool in view for p in pool.devices})
        return shapes[gi]

    def may_error(self, gi: int, view) -> bool:
        for shape in self._group_shapes(gi, view):
            erring = self.erring.get(shape)
            if erring is None:
                erring = False
                p = self.index.shape_members[shape][0]
                for req in self.reqs:
                    try:
                        self.selection(req, p)
                        search.consumed(req.capacity, self.index.shape_capacity[shape])
                    except search.AllocationError:
                        erring = True
                        break
                self.erring[shape] = erring
            if erring:
                return True
        return False

    def histogram(self, gi: int, view) -> list[tuple[int, bool, int]]:
        """(shape, allocated, how many) of the devices the group's nodes may use, incomplete
        pools marked allocated-like by a None."""
        cache = self.index.group_cache.histograms
        if gi not in cache:
            counts: dict = {}
            for pool in view:
                if pool.status == "invalid":
                    continue
                for p in pool.devices:
                    if pool.selectable is not None and p not in pool.selectable:
                        continue
                    device = self.index.devices[p]
                    state = None if pool.status == "incomplete" else device.key in self.index.allocated
                    counts[(device.shape, state)] = counts.get((device.shape, state), 0) + 1
            cache[gi] = [(shape, state, n) for (shape, state), n in counts.items()]
        return cache[gi]

    def __iter__(self):
        index = self.index
        for gi, (nodes, view) in enumerate(index.groups()):
            deadline.check()
            if self.skip:
                nodes = [n for n in nodes if n not in self.skip]
                if not nodes:
                    continue
            exact = self.order_matters or self.may_error(gi, view)
            if exact:
                buckets: dict = {}
                for node in nodes:
                    buckets.setdefault(index.ordered_signature(node), []).append(node)
                parts = list(buckets.values())
            else:
                parts = [nodes]
            for pi, members in enumerate(parts):
                if not self.attrs and not self.selection.per_device:
                    yield members, index.views[members[0]], exact, gi
                    continue
                for same in self._refined(gi, pi, members, exact):
                    yield same, index.views[same[0]], exact, gi

    def _refined(self, gi: int, pi: int, members: list[str], exact: bool) -> list[list[str]]:
        """The members split by what the claim's constraints (and per-device selector results)
        see on each node. Constraint patterns depend only on the node's devices: kept in the
        index for every claim after (a burst of claims with one constraint on 2,000 equal nodes
        recomputed them all for each claim)."""
        cache = self.index.group_cache.refined
        whole_key = (gi, pi, self.attrs, exact, bool(self.skip))
        if not self.selection.per_device and whole_key in cache:
            return cache[whole_key]
        refined: dict[tuple, list[str]] = {}
        for node in members:
            node_view = self.index.views[node]
            key = (self._constraint_pattern(node, node_view, exact) if self.attrs else (),
                   self.selection.pattern(node_view, self.reqs) if self.selection.per_device else ())
            refined.setdefault(key, []).append(node)
        groups = list(refined.values())
        if not self.selection.per_device:
            cache[whole_key] = groups
        return groups

    def _constraint_pattern(self, node: str, view, exact: bool) -> tuple:
        patterns, key = self.index.group_cache.constraints, (node, self.attrs, exact)
        found = patterns.get(key)
        if found is None:
            found = patterns[key] = _constraint_pattern(view, self.index, self.attrs, exact)
        return found


def _cannot(spec: ClaimSpec, histogram, index: Index, selection: _Selection, now: bool, passes: dict) -> bool:
    """A quick sufficient test that the search would fail: some request finds fewer free,
    tolerated devices passing its selectors than it needs (only for claims without All, where no
    error can come first). `passes` caches (request path, shape) -> bool across groups."""
    for alternatives in spec.requests:
        enough = False
        for req in alternatives:
            have = 0
            for shape, state, n in histogram:
                if state is None and now or (now and state and not req.admin):
                    continue  # incomplete pool now, or allocated
                key = (req.path, shape)
                ok = passes.get(key)
                if ok is None:
                    taints = index.shape_taints[shape]
                    ok = (not taints or all(search.tolerated(req.tolerations, t) for t in taints)) and \
                        selection(req, index.shape_members[shape][0])
                    passes[key] = ok
                if ok:
                    have += n
            if have >= req.count:
                enough = True
                break
        if not enough:
            return True
    return False


def _claim_error(spec: ClaimSpec, index: Index) -> str:
    """What upstream's allocator refuses on every node before it looks at a device."""
    fewest = 0
    for alternatives in spec.requests:
        fewest += min(r.count if r.mode != "All" else 0 for r in alternatives)
        if fewest > search.MAX_DEVICES_PER_CLAIM:
            return (f"request {alternatives[0].base}: the claim needs at least {fewest} devices, more than the "
                    f"claim limit of {search.MAX_DEVICES_PER_CLAIM}")
    for i, c in enumerate(spec.constraints):
        if not (c.get("matchAttribute") or c.get("distinctAttribute")):
            return f"spec.devices.constraints[{i}]: empty constraint (no matchAttribute or distinctAttribute)"
    return ""


FILTER_ALL_BELOW = 100  # the scheduler's minFeasibleNodesToFind


def check(spec: ClaimSpec, index: Index, count_nodes: bool = False, allocatable_only: bool = False,
          skip: frozenset = frozenset()) -> Verdict:
    """The verdict for one claim. count_nodes: decide every node group (the CLI's "satisfiable
    on N nodes"); otherwise stop at the first node that can hold the claim. allocatable_only:
    shadow nodes do not count (what the scheduler could allocate, not what validation judges);
    skip: these nodes do not count either."""
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
    missing = next((r for alts in spec.requests for r in alts if r.device_class not in index.classes), None)
    if missing is not None:  # the scheduler's PreFilter: Unschedulable, retried when the class appears
        return Verdict("never", f"{missing.path}.deviceClassName: DeviceClass {missing.device_class!r} does not "
                       "exist: the scheduler keeps the pod Unschedulable until it is created",
                       failed_request=missing.name, notes=notes)
    stop = _claim_error(spec, index)
    if stop and index.views:
        return Verdict("invalid", f"the scheduler would stop with an error on every node: {stop}", notes=notes)
    # Below 100 nodes the scheduler filters every node, and an error on any one of them fails the
    # pod's scheduling cycle whatever the others offer; from 100 on it stops once it has found
    # enough feasible nodes (percentageOfNodesToScore), so an erroring node may go unvisited.
    cluster_nodes = len(index.node_labels) if index.node_labels is not None else len(index.views)
    every = count_nodes or cluster_nodes < FILTER_ALL_BELOW
    units = _Units(index, spec, selection, (index.shadow_nodes | skip) if allocatable_only else skip)
    quick = not any(r.mode == "All" for r in units.reqs)

    failed: list = []  # (node, why) of nodes only that one fails: invalid pools (ErrFailedAllocationOnNode)

    def decide(now: bool):
        count, example, errors, undecided, binding = 0, None, [], 0, False
        passes: dict = {}
        for nodes, view, exact, gi in units:
            deadline.check()
            if quick and not exact and _cannot(spec, units.histogram(gi, view), index, selection, now, passes):
                error = search.invalid_pool_error(view)
                if error and now:
                    failed.append((nodes[0], error))
                continue
            try:
                outcome = search.allocate(spec, view, index, selection, now, selection.per_device, SEARCH_BUDGET)
            except search.BudgetExceeded:
                undecided += len(nodes)
                continue
            if outcome.status == "ok":
                count += len(nodes)
                example = example or nodes[0]
                binding = binding or outcome.binding
                if not every:
                    break
            elif outcome.status == "error":
                errors.append((nodes[0], outcome.message))
            elif outcome.status == "failed" and now:
                failed.append((nodes[0], outcome.message))
        return count, example, errors, undecided, binding

    nodes, example, errors, undecided, binding = decide(now=True)
    if binding:
        notes.append("the devices have binding conditions: the pod waits until the driver reports them ready")
    if errors and cluster_nodes < FILTER_ALL_BELOW:
        node, message = errors[0]
        return Verdict("invalid", f"the scheduler filters every node (fewer than {FILTER_ALL_BELOW}) and stops the "
                       f"pod's scheduling cycle with an error on node {node}: {message}", notes=notes)
    if errors:
        node, message = errors[0]
        notes.append(f"if the scheduler filters node {node} before it has found enough feasible nodes, it stops "
                     f"the pod's scheduling cycle with an error: {message}")
    if nodes:
        if failed:
            node, message = failed[0]
            notes.append(f"node {node} is unschedulable for it ({message}); the scheduler tries the other nodes")
        where = f"on {nodes} node(s), e.g. {example}" if count_nodes else f"e.g. on node {example}"
        return Verdict("satisfiable", f"satisfiable {where}", nodes, example, notes=notes)
    if errors:
        node, message = errors[0]
        return Verdict("invalid", f"the scheduler would stop with an error (on node {node}): {message}", notes=notes)
    verdict = _unsatisfiable(spec, index, selection, undecided, notes, count_nodes, decide)
    if failed:  # surfaced as the scheduler does: only because no node can take the pod
        node, message = failed[0]
        verdict.message = f"node {node} is unschedulable ({message}); no other node can hold it: {verdict.message}"
    return verdict


def _unsatisfiable(spec: ClaimSpec, index: Index, selection: _Selection, undecided: int, notes: list,
                   count_nodes: bool, decide) -> Verdict:
    """Why no node can take the claim now: the search ran out, devices are in use, or never."""
    if undecided:
        return Verdict("unsatisfiable-now", f"not decided: the search for {undecided} node(s) went past "
                       f"{SEARCH_BUDGET} device attempts", notes=notes)
    ever_nodes, ever_example, _errors, _undecided, _binding = decide(now=False)
    if ever_nodes:
        where = f"on {ever_nodes} node(s) (e.g. {ever_example})" if count_nodes else f"(e.g. on node {ever_example})"
        return Verdict("unsatisfiable-now", f"devices exist {where} but are allocated, their counters or capacity "
                       "are in use, or their pool is incomplete", notes=notes)
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
    units = _Units(index, spec, selection)
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
        return any(fits(p) for members in index.shape_members for p in members)  # live devices only
    return any(members and fits(members[0]) for members in index.shape_members)


def candidates(index: Index, req: Request) -> list[int]:
    """Positions of the live devices that pass the request's class and own selectors (a
    selector that does not compile or errors on a device: not passed)."""
    if req.device_class not in index.classes:
        return []
    selection = _Selection(index)
    selection.prepare(req)
    if any(results is None for _l, results in selection.parts[req.path]):
        return []
    return [p for members in index.shape_members for p in members if not selection.failed_parts(req, p)]


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


class TemplateVerdicts:
    """Verdicts of generated ResourceClaimTemplates on one index, remembered by name (a hash of
    the spec), so a template the path choice judged is not judged again for its report."""

    def __init__(self, index: Index, path: str = "template.spec", size: int = 4096):
        self.index, self.path, self.size = index, path, size
        self._seen: dict[str, Verdict] = {}
        self._allocatable: dict[str, Verdict] = {}
        self._open: dict[str, Verdict] = {}

    def __call__(self, template: dict, allocatable_only: bool = False, open_only: bool = False) -> Verdict:
        """allocatable_only: shadow nodes do not count (`check`); open_only: cordoned nodes do not
        count either. Each remembered apart."""
        seen = (self._open if open_only else self._allocatable) if allocatable_only else self._seen
        name = template["metadata"]["name"]
        verdict = seen.get(name)
        if verdict is None:
            if len(seen) >= self.size:
                seen.clear()
            verdict = check(parse_claim_spec(template["spec"]["spec"], self.path), self.index,
                            allocatable_only=allocatable_only, skip=self.index.cordoned if open_only else frozenset())
            seen[name] = verdict
        return verdict

    def dra(self, template: dict, tolerates_cordon: bool = False) -> tuple[str, str]:
        """Can DRA serve the template's claim with devices the scheduler can allocate? (state,
        why): serves; busy (they exist, all in use now); shadow (only on nodes our reporter
        shadows: nothing allocates there until NVIDIA's driver serves them); cordoned (only on
        cordoned nodes, which take no pod that does not tolerate it: drained, or moving in a
        rollout); never (no device anywhere, or an invalid claim, e.g. a DeviceClass that does
        not exist). tolerates_cordon: the pod tolerates node.kubernetes.io/unschedulable."""
        verdict = self(template)
        if verdict.status in ("never", "invalid"):
            return "never", verdict.message
        closed = bool(self.index.cordoned) and not tolerates_cordon
        allocatable = self(template, allocatable_only=True, open_only=closed) if self.index.shadow_nodes or closed \
            else verdict
        if allocatable.status == "never" and closed:
            reachable = self(template, allocatable_only=True)
            if reachable.status != "never":
                node = reachable.example_node if reachable.example_node in self.index.cordoned \
                    else min(self.index.cordoned)
                return "cordoned", (f"only cordoned nodes have such devices (e.g. {node}: drained, or moving in a "
                                    "rollout): it would be rewritten once such a node takes pods again")
        if allocatable.status == "never":
            node = verdict.example_node if verdict.example_node in self.index.shadow_nodes \
                else min(self.index.shadow_nodes)
            return "shadow", (f"only nodes no DRA driver serves yet have such devices ({verdict.nodes} shadowed by "
                              f"dra-bridge's reporter): it would be rewritten once NVIDIA's driver serves node {node}")
        if allocatable.status == "satisfiable":
            return "serves", allocatable.message
        return "busy", allocatable.message
