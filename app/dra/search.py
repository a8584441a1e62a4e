"""Exact allocation of one claim on one node, as upstream's allocator decides it. Pure.

Requests in order, subrequests (firstAvailable) in order, devices in pool order; each chosen
device is checked against taints, shared counters, consumable capacity and the constraints,
and the search backtracks until everything fits or nothing does (upstream's exhaustive
first-fit search, structured/internal/incubating). Upstream aborts the node on what it treats
as errors (a CEL runtime error on a device it evaluates, allocationMode All over an incomplete
pool, a constraint that excludes a device All needs, ...): so do we, in the same order, because
which device raises first depends on the order devices are tried.

Devices that cannot be told apart (same shape, counters, constraint values and state) are
tried once per position: the search stays small on nodes with many equal GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

from app.common import deadline, vocabulary

from .claims import ClaimSpec, Request
from .constraints import Constraint
from .quirks import all_continues_as_first, all_skips_used_capacity, searched_pools, selector_stand_ins

MAX_DEVICES_PER_CLAIM = vocabulary.DRA_MAX_DEVICES_PER_CLAIM
DEFAULT_BUDGET = 200_000  # device attempts per node before we give up deciding


class AllocationError(Exception):
    """What upstream's Allocate returns as an error for this node."""


class BudgetExceeded(Exception):
    pass


class _MaxSize(Exception):
    pass


@dataclass
class Outcome:
    status: str  # ok | none | failed (this node only: invalid pools) | error (upstream aborts the cycle)
    message: str = ""
    results: list = field(default_factory=list)  # (request name, device key)
    binding: bool = False  # a chosen device waits for binding conditions


def invalid_pool_error(view) -> str:
    """Upstream's error when nothing fits and the node sees an invalid pool; '' when none."""
    invalid = [p for p in view if p.status == "invalid"]
    if not invalid:
        return ""
    return f"invalid resource pools were encountered: pool {invalid[0].key[1]} ({invalid[0].reason})"


# -- consumable capacity (upstream's consumable_capacity.go semantics) -------------------------
def _round_up(requested: Decimal, policy: dict | None) -> Decimal:
    if not policy:
        return requested
    valid_range = policy.get("validRange")
    if valid_range and "min" in valid_range:
        low = valid_range["min"]
        if requested < low:
            return low
        step = valid_range.get("step")
        if not step:
            return requested
        steps = ((requested - low) / step).to_integral_value(ROUND_CEILING)
        return low + step * steps
    for value in policy.get("validValues") or ():
        if requested <= value:
            return value
    return requested


def _violates(amount: Decimal, policy: dict | None) -> bool:
    if not policy:
        return False
    if policy.get("default") is not None and amount == policy["default"]:
        return False
    valid_range = policy.get("validRange")
    if valid_range is not None:
        if valid_range.get("max") is not None and amount > valid_range["max"]:
            return True
        step = valid_range.get("step")
        return bool(step) and (amount - valid_range.get("min", Decimal(0))) % step != 0
    values = policy.get("validValues") or ()
    return bool(values) and amount not in values


def consumed(requests: dict | None, capacity: dict) -> dict:
    """What one allocation takes of each capacity of the device (request rounded up by policy,
    or the policy default, or the whole capacity); AllocationError for a negative amount."""
    out = {}
    for name, (value, policy) in capacity.items():
        if requests and name in requests:
            amount = _round_up(requests[name], policy)
        elif policy and policy.get("default") is not None:
            amount = policy["default"]
        else:
            amount = value
        if amount < 0:
            raise AllocationError(f"capacity {name!r}: capacity value is negative")
        out[name] = amount
    return out


def capacity_fits(requests: dict | None, capacity: dict, *used: dict) -> bool:
    if requests and any(name not in capacity for name in requests):
        return False  # the device does not have a capacity the request names
    taking = consumed(requests, capacity)
    for name, (value, policy) in capacity.items():
        if _violates(taking[name], policy):
            return False
        if taking[name] + sum(u.get(name, Decimal(0)) for u in used) > value:
            return False
    return True


@dataclass
class _Alternative:
    req: Request
    count: int = 0
    every: list = field(default_factory=list)  # allocationMode All: the devices it needs


class Search:
    def __init__(self, spec: ClaimSpec, view, index, selectable, now: bool, per_device: bool = False,
                 budget: int = DEFAULT_BUDGET):
        self.spec, self.view, self.index, self.selectable, self.now = spec, view, index, selectable, now
        self.per_device = per_device
        self.budget = budget
        self.pools = searched_pools(view, index.release, now)
        self.taking: set[int] = set()  # positions being allocated whole by this claim
        self.shares: dict[int, dict] = {}  # position -> capacity this claim's shares take
        self.counters: dict[tuple, dict] = {}  # pool key -> counterSet -> counter -> Decimal taken
        self.results: list[tuple] = []
        self.constraints: list[Constraint] = []
        self.rows: list[list[_Alternative]] = []
        self.enumerate_as = selector_stand_ins(spec, index.release)  # 1.34/1.35

    # -- upstream's Allocate: checks first, then the search ---------------------------------
    def run(self) -> Outcome:
        total = 0
        for alternatives in self.spec.requests:
            row = [self._prepare(req) for req in alternatives]
            fewest = min(a.count for a in row)
            if fewest > MAX_DEVICES_PER_CLAIM - total:
                raise AllocationError(f"request {alternatives[0].base}: adding {fewest} devices exceeds the claim "
                                      f"limit of {MAX_DEVICES_PER_CLAIM}, with {total} already accounted for")
            total += fewest
            self.rows.append(row)
        self.continue_with = all_continues_as_first(self.rows, self.index.release)  # 1.34/1.35
        for i, raw in enumerate(self.spec.constraints):
            if not (raw.get("matchAttribute") or raw.get("distinctAttribute")):
                raise AllocationError(f"constraint #{i}: empty constraint (unsupported constraint type?)")
            self.constraints.append(Constraint(raw, self.index.release))
        try:
            done = self._request(0)
        except _MaxSize:
            raise AllocationError("allocation max size exceeded") from None
        if done:
            binding = any(self.index.devices[p].binding for _n, p in self.results)
            return Outcome("ok", results=[(n, self.index.devices[p].key) for n, p in self.results], binding=binding)
        # Upstream wraps this one in ErrFailedAllocationOnNode: the scheduler marks the node
        # unschedulable and tries the others; it is surfaced only if no node can take the pod.
        error = invalid_pool_error(self.view)
        return Outcome("failed", error) if error else Outcome("none")

    def _prepare(self, req: Request) -> _Alternative:
        if req.device_class not in self.index.classes:
            raise AllocationError(f"{req.path}.deviceClassName: DeviceClass {req.device_class!r} does not exist")
        alt = _Alternative(req, req.count)
        if req.mode != "All":
            return alt
        for pool in self.view:
            if pool.status == "incomplete" and self.now:
                raise AllocationError(f"request {req.name}: asks for all devices, but resource pool {pool.key[1]} "
                                      "is currently being updated")
            if pool.status == "invalid":
                raise AllocationError(f"request {req.name}: asks for all devices, but resource pool {pool.key[1]} "
                                      f"is currently invalid ({pool.reason})")
            for p in pool.devices:  # before 1.37 All leaves out devices whose capacity is in use
                if self._selectable(self.enumerate_as.get(req.path, req), pool, p) and capacity_fits(
                        req.capacity, self.index.shape_capacity[self.index.devices[p].shape],
                        *(self._used(p) if all_skips_used_capacity(self.index.release) else ())):
                    alt.every.append((pool, p))
        alt.count = len(alt.every)
        return alt

    def _selectable(self, req: Request, pool, p: int) -> bool:
        # Selectors first (a runtime error aborts even for a device this node cannot use).
        return self.selectable(req, p) and (pool.selectable is None or p in pool.selectable)

    # -- the recursion ---------------------------------------------------------------------
    def _request(self, r: int) -> bool:
        if r >= len(self.rows):
            return True
        row = self.rows[r]
        if len(row) == 1 and self.spec.requests[r][0].name == self.spec.requests[r][0].base:
            return self._device(r, row[0], 0, (0, 0))
        all_too_big = True
        for alt in row:
            try:
                if self._device(r, alt, 0, (0, 0)):
                    return True
                all_too_big = False
            except _MaxSize:
                continue
        if all_too_big:
            raise _MaxSize()
        return False

    def _device(self, r: int, alt: _Alternative, i: int, start: tuple) -> bool:
        if alt.req.mode == "All" and not alt.every:
            return False
        if i >= alt.count:
            return self._request(r + 1)
        if alt.count - i > MAX_DEVICES_PER_CLAIM - len(self.results):
            raise _MaxSize()
        if alt.req.mode == "All":
            pool, p = alt.every[i]
            undo = self._take(alt.req, pool, p, must=True)
            if undo is None:
                return False
            return self._then(undo, r, self.continue_with.get(id(alt), alt), i + 1, (0, 0))
        tried: set = set()
        for pool_at in range(start[0], len(self.pools)):
            pool = self.pools[pool_at]
            if pool.status == "invalid":  # 1.34: an error where the search reaches it
                raise AllocationError(f"pool {pool.key[1]} is invalid: {pool.reason}")
            first = start[1] if pool_at == start[0] else 0
            for device_at in range(first, len(pool.devices)):
                p = pool.devices[device_at]
                if not self._free(alt.req, p) or not self._selectable(alt.req, pool, p):
                    continue
                shape = self.index.shape_capacity[self.index.devices[p].shape]
                if not capacity_fits(alt.req.capacity, shape, *self._used(p)):
                    continue
                twin = self._twin(pool, p)
                if twin in tried:
                    continue  # an equal device failed here already: so would this one
                self._spend()
                undo = self._take(alt.req, pool, p, must=False)
                if undo is None:
                    tried.add(twin)
                    continue
                if self._then(undo, r, alt, i + 1, (pool_at, device_at + 1)):
                    return True
                tried.add(twin)
        return False

    def _then(self, undo, r: int, alt: _Alternative, i: int, start: tuple) -> bool:
        """Continue after a device was taken; undone unless a solution was found."""
        try:
            if self._device(r, alt, i, start):
                return True
        except BaseException:
            undo()
            raise
        undo()
        return False

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise BudgetExceeded()
        if not self.budget & 255:
            deadline.check()

    def _twin(self, pool, p: int):
        """Devices with equal twins behave alike from here on: one failing means all fail."""
        if self.per_device:
            return p  # selectors read identity attributes: every device is its own
        device = self.index.devices[p]
        values = tuple(device.attribute(c.attribute) for c in self.constraints)
        return (pool.key, device.shape, device.consumes, repr(values), device.key in self.index.shared_in_use,
                device.key in self.index.allocated, repr(sorted(self.shares.get(p, {}).items())),
                repr(sorted(self.index.allocated_capacity.get(device.key, {}).items())) if self.now else "")

    def _free(self, req: Request, p: int) -> bool:
        key = self.index.devices[p].key
        if req.admin:
            return p not in self.taking
        return p not in self.taking and not (self.now and key in self.index.allocated)

    def _used(self, p: int) -> tuple:
        key = self.index.devices[p].key
        allocated = self.index.allocated_capacity.get(key, {}) if self.now else {}
        return allocated, self.shares.get(p, {})

    def _shared_already(self, p: int) -> bool:
        key = self.index.devices[p].key
        return p in self.shares or (self.now and (key in self.index.shared_in_use or
                                                  key in self.index.allocated_capacity))

    def _take(self, req: Request, pool, p: int, must: bool):
        """Allocate device p for req if taints, counters, constraints and capacity allow; the
        undo function, or None."""
        index = self.index
        device = index.devices[p]
        multiple = bool(index.shapes[device.shape].get("allowMultipleAllocations"))
        if not multiple and req.admin and p in self.taking:
            return None
        if not req.admin and (p in self.taking or (self.now and device.key in index.allocated)):
            return None
        steps: list = []

        def undo():
            for step in reversed(steps):
                step()

        if device.consumes and not (multiple and self._shared_already(p)):
            if not self._charge(pool, device.consumes):
                return None
            steps.append(lambda: self._refund(pool, device.consumes))
        taints = index.shape_taints[device.shape]
        if taints and not all(tolerated(req.tolerations, t) for t in taints):
            undo()
            return None
        for c in self.constraints:
            if not c.applies(req):
                continue
            if not c.add(device.attribute(c.attribute)):
                undo()
                if must:
                    raise AllocationError(f"request {req.name}: cannot add device {'/'.join(map(str, device.key))} "
                                          "because a claim constraint would not be satisfied")
                return None
            steps.append(c.remove)
        if not multiple:
            self.taking.add(p)
            steps.append(lambda: self.taking.discard(p))
        capacity = index.shape_capacity[device.shape]
        if not capacity_fits(req.capacity, capacity, *self._used(p)):
            undo()
            return None
        if multiple:
            taking = consumed(req.capacity, capacity)
            before = dict(self.shares.get(p, {}))
            existed = p in self.shares
            self.shares[p] = {n: before.get(n, Decimal(0)) + v for n, v in taking.items()}

            def unshare():
                if existed:
                    self.shares[p] = before
                else:
                    self.shares.pop(p, None)
            steps.append(unshare)
        self.results.append((req.name, p))
        steps.append(self.results.pop)
        return undo

    def _charge(self, pool, consumes: tuple) -> bool:
        taken = self.counters.setdefault(pool.key, {})
        for set_name, counters in consumes:
            for counter, amount in counters:
                row = taken.setdefault(set_name, {})
                row[counter] = row.get(counter, Decimal(0)) + amount
        used = pool.allocated_use if self.now else {}
        for set_name, counters in pool.counters.items():
            for counter, total in counters.items():
                have = total - used.get(set_name, {}).get(counter, Decimal(0))
                if taken.get(set_name, {}).get(counter, Decimal(0)) > have:
                    self._refund(pool, consumes)
                    return False
        return True

    def _refund(self, pool, consumes: tuple) -> None:
        taken = self.counters[pool.key]
        for set_name, counters in consumes:
            for counter, amount in counters:
                taken[set_name][counter] -= amount


def tolerated(tolerations: tuple, taint: tuple) -> bool:
    key, value, effect = taint
    for t_key, operator, t_value, t_effect in tolerations:
        if t_effect and t_effect != effect:
            continue
        if t_key and t_key != key:
            continue
        if operator == "Exists" or (operator == "Equal" and t_value == value):
            return True
    return False


def allocate(spec: ClaimSpec, view, index, selectable, now: bool, per_device: bool = False,
             budget: int = DEFAULT_BUDGET) -> Outcome:
    """One node: ok (with the devices), none, or error (upstream aborts); BudgetExceeded when
    the search would take longer than we let a check run. `selectable(request, position)` says
    whether a device passes the request's class and own selectors, AllocationError on a runtime
    error."""
    try:
        return Search(spec, view, index, selectable, now, per_device, budget).run()
    except AllocationError as exc:
        return Outcome("error", str(exc))
