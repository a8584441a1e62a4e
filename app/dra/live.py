"""A device index kept current event by event. Pure.

What reporters do all day (a node's own ResourceSlice changes) and what the scheduler does (a
claim gets or loses its allocation) re-derive only the views of the nodes involved and regroup
those nodes: milliseconds at 100,000 devices, where a full build takes seconds. Anything else
(a network-attached slice, DeviceClasses, Node labels), or dead device positions passing a
quarter of all, is a full build.

Readers keep the snapshot they were given: lists shared between snapshots are only appended to,
and every container an update edits is copied first.
"""

from __future__ import annotations

import bisect
import sys
from decimal import Decimal

from app.common import allocation_results, parse_quantity, quota_map, unpack

from .index import Index
from .indexbuild import Build
from .slicefields import pool_key
from .inventory import Inventory, taint_rule
from .shadow import shadow_of


def _interned(value):
    return sys.intern(value) if type(value) is str else value


def _claim_results(claim: dict) -> list[tuple]:
    """(device key, whole, shared, consumed capacity) per allocated result of one claim."""
    out = []
    for r in allocation_results(claim):
        if r.get("adminAccess"):
            continue
        # Drivers and pools (nodes) repeat across thousands of claims: each held once.
        key = (_interned(r.get("driver")), _interned(r.get("pool")), r.get("device"))
        consumed = {}
        if r.get("shareID") and isinstance(r.get("consumedCapacity"), dict):
            for name, amount in r["consumedCapacity"].items():
                try:
                    consumed[name] = parse_quantity(amount)
                except ValueError:
                    continue  # the API server validated it; a value we cannot read charges nothing
        out.append((key, not r.get("shareID"), bool(r.get("shareID")), consumed or None))
    return out


class _HandedOver:
    """A replaced LiveIndex's build: its last snapshot, nothing to update it by."""

    def __init__(self, index: Index, cache):
        self.index, self.cache = index, cache


class LiveIndex:
    def __init__(self, slices, classes: dict[str, dict], claims, nodes: dict[str, dict] | None,
                 node_resources: dict[str, dict[str, int]] | None = None, quotas: list[dict] | None = None,
                 taint_rules: list[dict] | None = None, cordoned=frozenset(), not_ready=frozenset(),
                 priority_classes: list[dict] | None = None, leaving=frozenset(),
                 previous: "LiveIndex | None" = None, release=None):
        """slices: iterable of ResourceSlices (decoded, or packed: app.common.packed), claims: of (key,
        claim) pairs (decoded or packed) or a key -> claim map; each consumed once, so neither need be decoded all at
        once. previous: the index this one replaces; what it derived from unchanged raw slices
        is taken, not rebuilt (app.dra.slicecache). nodes: name -> labels;
        node_resources: name -> extended resources allocatable (what device plugins advertise);
        quotas: ResourceQuotas; taint_rules: DeviceTaintRules (None: not watched); cordoned: names of
        nodes with spec.unschedulable; priority_classes: PriorityClasses (None: not read); release:
        the cluster's Kubernetes release (common.release; its allocator's rules)."""
        self.release = release
        self.priority_classes = priority_classes
        self.classes, self.nodes, self.node_resources = dict(classes), nodes, node_resources
        self.cordoned, self.not_ready, self.leaving = frozenset(cordoned), frozenset(not_ready), frozenset(leaving)
        self.quotas = quota_map(quotas) if quotas is not None else None
        self.taint_rules = [taint_rule(r, "live DeviceTaintRule") for r in taint_rules or ()]
        self.claims: dict[str, list[tuple]] = {}
        self.whole: dict[tuple, int] = {}
        self.shares: dict[tuple, int] = {}
        self.capacity: dict[tuple, dict[str, Decimal]] = {}
        # Claims given packed (a live inventory's): one unchanged since `previous` keeps its results.
        self.claim_raw: dict[str, bytes] = {}
        earlier, earlier_raw = (previous.claims, previous.claim_raw) if previous is not None else ({}, {})
        for key, claim in (claims.items() if isinstance(claims, dict) else claims):
            if isinstance(claim, bytes):
                self.claim_raw[key] = claim
                results = earlier.get(key, []) if earlier_raw.get(key) == claim else _claim_results(unpack(claim))
            else:
                results = _claim_results(claim)
            self._count(key, results, +1)
        self._full(slices, previous.handed_over() if previous is not None else None)

    # -- full build ----------------------------------------------------------------------
    def _full(self, slices, cache=None) -> None:
        self.build = Build(Inventory(slices=slices, classes=self.classes, source="live", nodes=self.nodes,
                                     node_resources=self.node_resources, quotas=self.quotas,
                                     taint_rules=self.taint_rules, cordoned=self.cordoned, leaving=self.leaving,
                                     not_ready=self.not_ready, priority_classes=self.priority_classes,
                                     release=self.release),
                           set(self.whole), {k: dict(v) for k, v in self.capacity.items() if v}, set(self.shares),
                           previous=cache)
        self.dead = 0
        self.full_builds = getattr(self, "full_builds", 0) + 1

    def handed_over(self):
        """What a full build replacing this index takes from it; the bookkeeping only updates
        of this index read is let go (its snapshots stay whole for readers still holding one)."""
        cache = self.build.cache
        self.claims, self.claim_raw, self.whole, self.shares, self.capacity = {}, {}, {}, {}, {}
        self.build = _HandedOver(self.build.index, cache)
        return cache

    def rebuild(self, slices) -> Index:
        self._full(slices, self.build.cache)
        return self.build.index

    @property
    def index(self) -> Index:
        return self.build.index

    # -- events --------------------------------------------------------------------------
    def needs_full_build(self, old: dict | None, new: dict | None) -> bool:
        """A slice change the incremental path does not take: one not local to a node."""
        index = self.build.index
        for s in (old, new):
            if s is not None and not (s.get("spec") or {}).get("nodeName"):
                return True
            # Shadow slices, and real slices of a node shadows stand in for: which of them
            # the node is judged by is a whole-inventory choice (app.dra.shadow).
            if s is not None and (shadow_of(s) or s["spec"].get("nodeName") in self.build.shadow_nodes):
                return True
        if self.nodes is None and self.build.network:
            return True  # which nodes exist then depends on every slice (a stand-in node)
        return self.dead > max(len(index.devices) // 4, 1024)

    def slice_changed(self, name: str, full: dict | bytes | None) -> Index | None:
        """Apply one slice added, modified (full: decoded, or packed: app.common.packed) or deleted
        (None); the new snapshot, or None when only a full build can take it (the caller then
        calls `rebuild`)."""
        build = self.build
        old = build.by_name.get(name)
        raw = full if isinstance(full, bytes) else None
        decoded = unpack(raw) if raw is not None else full if isinstance(full, dict) else None
        full = decoded if decoded is not None and isinstance(decoded.get("spec"), dict) else None
        if self.needs_full_build(old, full):
            return None
        if full is None:
            build.cache.forget(name)  # a new version replaces the entry when it is derived
        snapshot = self._begin()
        pools, nodes = set(), set()
        if old is not None:
            pools.add(pool_key(old))
            self._remove(name, old)
        if full is not None:
            s = build.add(full, raw)
            if s is not None:
                pools.add(pool_key(s))
        for pool in pools:
            nodes |= {s["spec"].get("nodeName") for s in build.builder.pools.get(pool, ())}
            if old is not None and pool_key(old) == pool:
                nodes.add(old["spec"].get("nodeName"))
        return self._finish(snapshot, pools, nodes - {None})

    def claim_changed(self, key: str, claim: dict | bytes | None) -> Index | None:
        """Apply one claim added, modified (decoded or packed) or deleted; None when a full
        build is needed (a network-attached device changed state)."""
        decoded: dict | None = None
        if isinstance(claim, bytes):
            self.claim_raw[key], decoded = claim, unpack(claim)
        elif claim is None:
            self.claim_raw.pop(key, None)
        else:
            decoded = claim
        before = self.claims.get(key, [])
        after = _claim_results(decoded) if decoded is not None else []
        if before == after:
            return self.build.index
        changed = {r[0] for r in before} | {r[0] for r in after}
        self._count(key, before, -1)
        self._count(key, after, +1)
        pools = {(k[0], k[1]) for k in changed}
        nodes = set()
        for pool in pools:
            for s in self.build.builder.pools.get(pool, ()):
                if not s["spec"].get("nodeName"):
                    return None
                nodes.add(s["spec"]["nodeName"])
        snapshot = self._begin()
        snapshot.epoch = self._previous.epoch  # allocations only
        snapshot.allocated = set(self.whole)
        snapshot.shared_in_use = set(self.shares)
        snapshot.allocated_capacity = {k: dict(v) for k, v in self.capacity.items() if v}
        return self._finish(snapshot, pools, nodes)

    def _count(self, key: str, results: list[tuple], sign: int) -> None:
        for device, whole, shared, consumed in results:
            for counts, flag in ((self.whole, whole), (self.shares, shared)):
                if flag:
                    counts[device] = counts.get(device, 0) + sign
                    if counts[device] <= 0:
                        del counts[device]
            if consumed:
                used = self.capacity.setdefault(device, {})
                for name, amount in consumed.items():
                    used[name] = used.get(name, Decimal(0)) + sign * amount
                    if not used[name]:
                        del used[name]
                if not used:
                    del self.capacity[device]
        if sign > 0 and results:
            self.claims[key] = results
        elif sign < 0:
            self.claims.pop(key, None)

    # -- the update itself ---------------------------------------------------------------
    def _begin(self) -> Index:
        """The next snapshot: the containers an update edits, copied; appended lists shared."""
        old = self.build.index
        snapshot = Index(
            devices=old.devices, shapes=old.shapes, shape_members=list(old.shape_members),
            shape_flat=old.shape_flat, shape_taints=old.shape_taints, shape_capacity=old.shape_capacity,
            views=dict(old.views), node_groups=dict(old.node_groups), classes=old.classes,
            allocated=old.allocated, allocated_capacity=old.allocated_capacity, shared_in_use=old.shared_in_use,
            incomplete_pools=dict(old.incomplete_pools), invalid_pools=dict(old.invalid_pools),
            rejected=list(old.rejected), node_labels_known=old.node_labels_known,
            node_labels=old.node_labels, node_resources=old.node_resources, quotas=old.quotas,
            priority_classes=old.priority_classes, selector_slices=old.selector_slices,
            selector_cache=old.selector_cache, shadow_nodes=old.shadow_nodes, cordoned=old.cordoned,
            leaving=old.leaving, release=old.release)
        self.build.index = self.build.builder.index = snapshot
        self.build.builder.copied = set()
        self._previous, self._rejected_dirty = old, False
        return snapshot

    def _remove(self, name: str, old: dict) -> None:
        build, index = self.build, self.build.index
        build.by_name.pop(name, None)
        pool = build.builder.pools.get(pool_key(old), [])
        pool[:] = [s for s in pool if s is not old]
        node = old["spec"].get("nodeName")
        build.local[node] = [s for s in build.local.get(node, []) if s is not old]
        if not build.local[node]:
            del build.local[node]
        dead = build.builder.positions.pop(id(old), [])
        by_shape: dict[int, set[int]] = {}
        for p in dead:
            by_shape.setdefault(index.devices[p].shape, set()).add(p)
        for shape, gone in by_shape.items():
            index.shape_members[shape] = [p for p in index.shape_members[shape] if p not in gone]
            if build.builder.copied is not None:
                build.builder.copied.add(shape)
        self.dead += len(dead)
        if build.rejected_by_slice.pop(name, None):
            self._rejected_dirty = True  # recomputed from the slices that remain, in _finish

    def _finish(self, snapshot: Index, pools: set, nodes: set) -> Index:
        build, old = self.build, self._previous
        if self._rejected_dirty:
            snapshot.rejected = [r for entries in build.rejected_by_slice.values() for r in entries]
        for pool in pools:
            snapshot.incomplete_pools.pop(pool, None)
            snapshot.invalid_pools.pop(pool, None)
        old_keys = list(old.node_groups)
        for node in sorted(nodes):
            signature = build.signature_of.pop(node, None)
            if signature is not None:
                members = [n for n in snapshot.node_groups.get(signature, ()) if n != node]
                if members:
                    snapshot.node_groups[signature] = members
                else:
                    snapshot.node_groups.pop(signature, None)
            if self.nodes is not None and node not in self.nodes and node not in build.local:
                snapshot.views.pop(node, None)  # no Node object and no slice names it any more
                continue
            if build.place(node):
                signature = build.signature_of[node]
                members = list(snapshot.node_groups.get(signature, ()))
                bisect.insort(members, node)
                snapshot.node_groups[signature] = members
        snapshot.node_groups = dict(sorted(snapshot.node_groups.items(), key=lambda kv: kv[1][0]))
        self._carry_caches(old, snapshot, old_keys, nodes)
        build.builder.copied = None
        return snapshot

    @staticmethod
    def _carry_caches(old: Index, snapshot: Index, old_keys: list, changed: set) -> None:
        """Per-group caches depend only on the group's signature, per-node ones on the node's
        view: both are kept for what the update did not touch (a group's split by constraints
        is rebuilt from its nodes' kept patterns)."""
        position = {signature: gi for gi, signature in enumerate(snapshot.node_groups)}
        snapshot.group_cache = old.group_cache.carried(old_keys, position, changed)
