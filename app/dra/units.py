"""The sets of nodes one exact search decides for a claim, and the quick test that a search
would fail. Pure."""

from __future__ import annotations

from app.common import deadline

from . import constraints, search
from .claims import ClaimSpec
from .index import Index
from .quirks import before
from .selection import Selection


def constraint_pattern(view, index: Index, attrs: tuple[str, ...], ordered: bool) -> tuple:
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
            rows.append((device.shape, state, tuple(constraints.match_key(device.attribute(a)) for a in attrs)))
    ranks = [{v: i for i, v in enumerate(sorted({r[2][k] for r in rows} - {None}, key=repr))}
             for k in range(len(attrs))]
    out = [(shape, state, tuple(None if v is None else ranks[k][v] for k, v in enumerate(values)))
           for shape, state, values in rows]
    return (tuple(out if ordered else sorted(out, key=repr)), tuple(pools if ordered else sorted(pools, key=repr)))


class Units:
    """The sets of nodes one search decides for this claim. Nodes in one canonical group hold the
    same devices; their order matters only where an error can stop upstream's search first (a
    CEL runtime error, a constraint on allocationMode All, the 32-device limit): such groups are
    split by their exact order."""

    def __init__(self, index: Index, spec: ClaimSpec, selection: Selection, skip: frozenset = frozenset()):
        """skip: nodes left out (the shadow nodes, when only what can be allocated counts)."""
        self.index, self.spec, self.selection, self.skip = index, spec, selection, skip
        attrs = [c.get("matchAttribute") or c.get("distinctAttribute") for c in spec.constraints]
        self.attrs = tuple(a for a in attrs if isinstance(a, str))
        self.reqs = [r for alts in spec.requests for r in alts]
        constrained_all = any(r.mode == "All" and any(constraints.applies(c.get("requests") or (), r)
                                                      for c in spec.constraints) for r in self.reqs)
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
            key = (self.constraint_pattern(node, node_view, exact) if self.attrs else (),
                   self.selection.pattern(node_view, self.reqs) if self.selection.per_device else ())
            refined.setdefault(key, []).append(node)
        groups = list(refined.values())
        if not self.selection.per_device:
            cache[whole_key] = groups
        return groups

    def constraint_pattern(self, node: str, view, exact: bool) -> tuple:
        patterns, key = self.index.group_cache.constraints, (node, self.attrs, exact)
        found = patterns.get(key)
        if found is None:
            found = patterns[key] = constraint_pattern(view, self.index, self.attrs, exact)
        return found


def cannot(spec: ClaimSpec, histogram, index: Index, selection: Selection, now: bool, passes: dict) -> bool:
    """A quick sufficient test that the search would fail: some request finds fewer free,
    tolerated devices passing its selectors than it needs (only for claims without All, where no
    error can come first). `passes` caches (request path, shape) -> bool across groups."""
    incomplete_skipped = now and not before(index.release, 35)  # 1.34 allocates from incomplete pools
    for alternatives in spec.requests:
        enough = False
        for req in alternatives:
            have = 0
            for shape, state, n in histogram:
                if state is None and incomplete_skipped or (now and state and not req.admin):
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
