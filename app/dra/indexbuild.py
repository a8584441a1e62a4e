"""Building a device index from an inventory: each slice's devices into shapes, and each node's
view of the pools its slices reach, as upstream's allocator gathers them. Pure."""

from __future__ import annotations

from decimal import Decimal

import orjson

from app.common import extended_allocatable, leaving_dra, node_matches, not_ready, parse_quantity, unpack, view_of

from app import cel

from . import shadow
from . import slicefields as fields
from .index import ANY_NODE, Device, Index, PoolView, view_signature
from .inventory import Inventory, allocated_capacity, allocated_devices, apply_taint_rules, shared_devices
from .slicecache import Derived, ShapeTable, SliceCache


class _Builder:
    def __init__(self, inventory: Inventory, index: Index, table: ShapeTable):
        self.index, self.table = index, table
        self.positions: dict[int, list[int]] = {}  # id(slice) -> device positions
        self.pools: dict[tuple, list[dict]] = {}
        self.node_labels = inventory.nodes
        self.copied: set[int] | None = None  # incremental updates: shapes whose member list was copied

    def members(self, shape: int) -> list[int]:
        """The member list of a shape, to append to; copied first when readers may hold it."""
        members = self.index.shape_members
        while len(members) < len(self.table.shapes):
            members.append([])  # shapes another build of the same table added
        if self.copied is not None and shape not in self.copied:
            members[shape] = list(members[shape])
            self.copied.add(shape)
        return members[shape]

    def derive(self, full: dict, shadow: bool = False, donor: Derived | None = None) -> Derived:
        """The slice as kept (its spec without the device bodies, so a large inventory is never
        all decoded at once), its devices and those left out. Touches only the shape table.
        donor: what an earlier version of the slice gave; its devices' keys and identities are
        shared where equal, so a slice derived again costs its new devices little."""
        spec = full["spec"]
        devices = spec.get("devices") or []
        earlier = {d.key: d for d in donor.devices} if donor is not None else {}
        names = {d.key[2]: d.key[2] for d in earlier.values()}
        s = {"metadata": {"name": view_of(full).name},
             "spec": {**{k: v for k, v in spec.items() if k != "devices"},
                      "deviceNames": [names.get(d.get("name"), d.get("name")) if isinstance(d, dict) else None
                                      for d in devices]}}
        if donor is not None and donor.kept == s:
            s = donor.kept  # positions are keyed by id(s): one build never holds both
        if spec.get("sharedCounters"):
            return Derived(s, (), (), shadow)  # a counter slice: its devices are not allocatable (upstream)
        driver, pool_name = spec.get("driver"), (spec.get("pool") or {}).get("name")
        per_device = bool(spec.get("perDeviceNodeSelection"))
        table, out, rejected = self.table, [], []
        for raw in devices:
            if not isinstance(raw, dict):
                continue
            try:
                shape_variable, identity = fields.split_identity(cel.device_variable(driver, raw))
                capacity = fields.capacity(raw.get("capacity"))
                consumes = fields.consumes(raw.get("consumesCounters"))
            except (ValueError, TypeError, AttributeError) as exc:
                rejected.append((driver, pool_name, raw.get("name"), str(exc)))
                continue
            taints = fields.blocking_taints(raw.get("taints"))
            key = orjson.dumps([shape_variable, taints, {k: [str(v), repr(p)] for k, (v, p) in capacity.items()}],
                               option=orjson.OPT_SORT_KEYS)
            if key not in table.ids:
                table.ids[key] = len(table.shapes)
                table.shapes.append(shape_variable)
                table.taints.append(taints)
                table.capacity.append(capacity)
                table.flat.append({f"{d}/{n}": v for d, names in shape_variable["attributes"].items()
                                   for n, v in names.items()})
            packed = tuple(x for k, v in identity.items() for x in (table.identity_keys.setdefault(k, k), v))
            device_key = (driver, pool_name, raw.get("name"))
            before = earlier.get(device_key)
            if before is not None:
                device_key = before.key
                packed = before.identity if before.identity == packed else packed
                consumes = before.consumes if before.consumes == consumes else consumes
            out.append(Device(device_key, spec.get("nodeName") or None, packed,
                              table.ids[key], consumes, bool(raw.get("bindingConditions")),
                              fields.placement(raw) if per_device else None, table.tables))
        return Derived(s, tuple(out), tuple(rejected), shadow)

    def adopt(self, derived: Derived) -> dict:
        """Place a derived slice's devices in this index; the slice as kept."""
        s, index = derived.kept, self.index
        spec = s["spec"]
        self.pools.setdefault(fields.pool_key(s), []).append(s)
        positions = self.positions.setdefault(id(s), [])
        if spec.get("nodeSelector") is not None or spec.get("perDeviceNodeSelection"):
            index.selector_slices += 1
        index.rejected.extend(derived.rejected)
        for device in derived.devices:
            position = len(index.devices)
            index.devices.append(device)
            self.members(device.shape).append(position)
            positions.append(position)
        return s

    # -- per node: upstream's GatherPools --------------------------------------------------
    def reaches(self, s: dict, node: str) -> bool:
        spec = s["spec"]
        if spec.get("nodeName"):
            return spec["nodeName"] == node
        if spec.get("allNodes"):
            return True
        if spec.get("nodeSelector") is not None:
            return self.selector_matches(spec["nodeSelector"], node)
        if spec.get("perDeviceNodeSelection"):
            return any(self.device_reaches(d, node) for d in self.positions[id(s)])
        return False  # nothing known was set: some future extension, ignored

    def selector_matches(self, selector, node: str) -> bool:
        if self.node_labels is None:
            return True  # no Node objects read: assumed reachable (the verdict says so)
        return node_matches(selector, node, self.node_labels.get(node) or {})

    def device_reaches(self, position: int, node: str) -> bool:
        placement = self.index.devices[position].placement
        if placement is None:
            return True
        kind = placement[0]
        if kind == "name":
            return placement[1] == node
        if kind == "all":
            return True
        if kind == "selector":
            return self.selector_matches(placement[1], node)
        return False

    def view(self, node: str, local: list[dict], shared: list[dict]) -> list[PoolView]:
        targeting: dict[tuple, list[dict]] = {}
        for s in local + shared:
            if not self.reaches(s, node):
                continue
            key = fields.pool_key(s)
            current = targeting.get(key)
            if current is None or fields.generation(s) > fields.generation(current[0]):
                targeting[key] = [s]
            elif fields.generation(s) == fields.generation(current[0]):
                current.append(s)
        ready: list = []
        waiting: list = []
        for key, slices in targeting.items():
            pool = self.pool_view(node, key, slices)
            if pool is not None:
                (waiting if pool.binding else ready).append(pool)
        order = lambda p: (str(p.key[0]), str(p.key[1]))  # noqa: E731 - upstream sorts pools by ID
        return sorted(ready, key=order) + sorted(waiting, key=order)

    def pool_view(self, node: str, pool_key: tuple, slices: list[dict]) -> PoolView | None:
        count, generation = fields.slice_count(slices[0]), fields.generation(slices[0])
        local = slices[0]["spec"].get("nodeName") == node
        by_name = sorted(slices, key=lambda s: str(view_of(s).name))
        device_slices = [s for s in by_name if not s["spec"].get("sharedCounters")]
        devices = tuple(p for s in device_slices for p in self.positions[id(s)])
        per_device = {p for s in device_slices if s["spec"].get("perDeviceNodeSelection")
                      for p in self.positions[id(s)]}
        selectable = None
        if per_device:
            selectable = frozenset(p for p in devices if p not in per_device or self.device_reaches(p, node))
        everything = None
        if len(slices) != count:
            all_slices = self.pools[pool_key]
            if any(fields.generation(s) > generation for s in all_slices):
                return None  # being replaced by a newer generation: ignored
            everything = [s for s in all_slices if fields.generation(s) == generation]
            if len(everything) != count:
                self.index.incomplete_pools[pool_key] = (f"{len(everything)} of its {count} slice(s) at generation "
                                                         f"{generation} published")
                # Devices and counters kept: once complete the pool may serve (the "not now" verdict).
                pool = PoolView(pool_key, "incomplete", devices, selectable, local=local)
                self.invalid(device_slices, [s for s in everything if s["spec"].get("sharedCounters")], [], pool)
                return pool
        targeting_ids = {id(s) for s in slices}
        counter_slices = [s for s in (everything or slices) if s["spec"].get("sharedCounters")]
        others = [s for s in everything or () if id(s) not in targeting_ids and not s["spec"].get("sharedCounters")]
        pool = PoolView(pool_key, "ok", devices, selectable, local=local,
                        binding=any(self.index.devices[p].binding for p in devices))
        why = self.invalid(device_slices, counter_slices, others, pool)
        if why:
            self.index.invalid_pools[pool_key] = why
            return PoolView(pool_key, "invalid", reason=why, local=pool.local)
        return pool

    def invalid(self, device_slices, counter_slices, others, pool: PoolView) -> str:
        """Why the pool cannot be used ("" when it can); fills its counters and what allocated
        devices use of them (left the shared empty mapping where none: most pools have none)."""
        counters: dict = {}
        allocated_use: dict = {}
        why = self._check_counters(device_slices, counter_slices, others, counters, allocated_use)
        pool.counters = counters or pool.counters
        pool.allocated_use = allocated_use or pool.allocated_use
        return why

    def _check_counters(self, device_slices, counter_slices, others, counters: dict, allocated_use: dict) -> str:
        names = set()
        for s in device_slices:
            for name in s["spec"]["deviceNames"]:
                if name in names:
                    return f"duplicate device name {name}"
                names.add(name)
        for s in counter_slices:
            for counter_set in s["spec"].get("sharedCounters") or []:
                name = (counter_set or {}).get("name")
                if name in counters:
                    return f"duplicate counter set name {name}"
                try:
                    counters[name] = {c: parse_quantity((v or {}).get("value"))
                                      for c, v in ((counter_set or {}).get("counters") or {}).items()}
                except ValueError as exc:
                    return f"counter set {name}: {exc}"
        allocated = self.index.allocated
        for s in device_slices + others:
            for p in self.positions[id(s)]:
                device = self.index.devices[p]
                for set_name, amounts in device.consumes:
                    if set_name not in counters:
                        return f"counter set {set_name} not found"
                    for counter, amount in amounts:
                        if counter not in counters[set_name]:
                            return f"counter {counter} not found in counter set {set_name}"
                        if device.key in allocated or device.key in self.index.shared_in_use \
                                or device.key in self.index.allocated_capacity:
                            use = allocated_use.setdefault(set_name, {})
                            use[counter] = use.get(counter, Decimal(0)) + amount
        return ""


class Build:
    """A full build, with the state an incremental update needs (app.dra.live)."""

    def __init__(self, inventory: Inventory, allocated: set | None = None, capacity: dict | None = None,
                 shared: set | None = None, previous: SliceCache | None = None):
        """inventory.slices may yield bytes (a live inventory's, app.common.packed): what `previous`
        derived from the same bytes is taken as is, and `cache` keeps what this build derived."""
        self.cache = SliceCache.after(previous, inventory.taint_rules)
        table = self.cache.table
        index = Index(classes=dict(inventory.classes), allocated=set(allocated or ()),
                      allocated_capacity=dict(capacity or {}), shared_in_use=set(shared or ()),
                      node_labels_known=inventory.nodes is not None, node_labels=inventory.nodes,
                      node_resources=inventory.node_resources, quotas=inventory.quotas,
                      priority_classes=inventory.priority_classes,
                      cordoned=frozenset(inventory.cordoned), not_ready=frozenset(inventory.not_ready),
                      leaving=frozenset(inventory.leaving), shapes=table.shapes, shape_flat=table.flat,
                      shape_taints=table.taints, shape_capacity=table.capacity, release=inventory.release)
        self.index, self.inventory = index, inventory
        self.builder = _Builder(inventory, index, table)
        self.local: dict[str, list[dict]] = {}
        self.network: list[dict] = []
        self.by_name: dict[str, dict] = {}  # slice name -> what is kept of it
        self.rejected_by_slice: dict[str, list] = {}
        self.signature_of: dict[str, bytes] = {}  # node -> its group's signature
        self.shadow_nodes: set[str] = set()  # nodes judged by shadow slices (app.dra.shadow)
        self.shadowed = 0  # shadow slices ignored: the real driver publishes for their node
        shadows = []
        for item in inventory.slices:  # may be a generator: each slice is decoded, indexed, let go
            derived = self.derived(item)
            if derived is not None and derived.shadow:
                shadows.append(derived)
            elif derived is not None:
                self.place_slice(derived)
        for derived in shadows:
            node, driver = derived.kept["spec"].get("nodeName"), derived.kept["spec"]["driver"]
            if any(s["spec"].get("driver") == driver for s in self.local.get(node, ())):
                self.shadowed += 1
                continue
            if node:
                self.shadow_nodes.add(node)
            self.place_slice(derived)
        self.cache.done()
        # The nodes slices name, and every Node object (one with no devices of its own can still
        # reach network-attached ones); without Node objects, a stand-in for network-attached devices.
        named = set(self.local) | {d.placement[1] for d in index.devices if d.placement and d.placement[0] == "name"}
        if inventory.nodes is not None:
            nodes = sorted(named | set(inventory.nodes))
        else:
            nodes = sorted(named) or ([ANY_NODE] if self.network else [])
        for node in nodes:
            if self.place(node):
                index.node_groups.setdefault(self.signature_of[node], []).append(node)
        # Groups in order of their first node (nodes are sorted): examples stay deterministic.
        index.node_groups = dict(sorted(index.node_groups.items(), key=lambda kv: kv[1][0]))
        index.shape_members.extend([] for _ in range(len(table.shapes) - len(index.shape_members)))
        index.shadow_nodes = frozenset(self.shadow_nodes)

    def derived(self, given: dict | bytes, raw: bytes | None = None) -> Derived | None:
        """What a slice gives the index (given: decoded, or packed bytes, app.common.packed; raw: the
        bytes it was unpacked from, when the caller had to); None: no spec."""
        item: dict | None = None
        if isinstance(given, bytes):
            raw = given
        else:
            item = given
        found = self.cache.earlier(raw) if raw is not None else None
        if found is None:
            item = unpack(raw) if item is None and raw is not None else item
            if item is None:
                return None
            if not isinstance(item.get("spec"), dict):
                return None
            is_shadow = bool(shadow.shadow_of(item))
            served = shadow.as_served(item) if is_shadow else item
            found = self.builder.derive(apply_taint_rules(served, self.inventory.taint_rules), is_shadow,
                                        self.cache.donor(view_of(item).name))
        if raw is not None:
            self.cache.remember(found.kept["metadata"]["name"], raw, found)
        return found

    def add(self, item: dict | bytes, raw: bytes | None = None) -> dict | None:
        """Index one slice (incremental updates: shadows are whole-inventory builds)."""
        derived = self.derived(item, raw)
        return None if derived is None else self.place_slice(derived)

    def place_slice(self, derived: Derived) -> dict:
        s = self.builder.adopt(derived)
        name = s["metadata"]["name"]
        self.by_name[name] = s
        if derived.rejected:
            self.rejected_by_slice[name] = list(derived.rejected)
        node = s["spec"].get("nodeName")
        (self.local.setdefault(node, []) if node else self.network).append(s)
        return s

    def place(self, node: str) -> bool:
        """(Re)compute a node's view and signature; False when the node has nothing to see."""
        index = self.index
        view = self.builder.view(node, self.local.get(node, []), self.network)
        if not view and self.inventory.nodes is None:
            index.views.pop(node, None)
            self.signature_of.pop(node, None)
            return False
        index.views[node] = view
        self.signature_of[node] = view_signature(view, index, ordered=False)
        return True


def build(inventory: Inventory, allocated: set | None = None, capacity: dict | None = None,
          shared: set | None = None) -> Index:
    """allocated, capacity, shared: what claims hold; by default what the inventory's claims hold."""
    if allocated is None and inventory.claims:
        claims = inventory.claims
        allocated, capacity, shared = allocated_devices(claims), allocated_capacity(claims), shared_devices(claims)
    return Build(inventory, allocated, capacity, shared).index


def build_from_api(slices, classes: dict[str, dict], claims: list[dict], nodes: list[dict] | None = None) -> Index:
    """The index of objects as the API serves them (the live inventory's builder); `slices` may
    be a generator, consumed once."""
    labels = None if nodes is None else {
        view_of(n).name: view_of(n).labels for n in nodes}
    resources = None if nodes is None else {view_of(n).name: extended_allocatable(n) for n in nodes}
    cordoned = frozenset(view_of(n).name for n in nodes or ()
                         if (n.get("spec") or {}).get("unschedulable"))
    inventory = Inventory(slices=slices, classes=classes, source="live", nodes=labels, node_resources=resources,
                          cordoned=cordoned, not_ready=frozenset(view_of(n).name for n in nodes or () if not_ready(n)),
                          leaving=frozenset(view_of(n).name for n in nodes or () if leaving_dra(n)))
    return build(inventory, allocated_devices(claims), allocated_capacity(claims), shared_devices(claims))
