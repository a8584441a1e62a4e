"""Can the devices in an Index satisfy a claim? Pure.

Each group of interchangeable nodes is decided once by the exact search (search.py), first as
things are now (allocated devices, consumed counters and capacity, incomplete pools), then as
they could be once those free up. Selector results are computed per device shape, lazily, in the
order the search asks for them, and kept in the index across checks.
"""

from __future__ import annotations

from app.common import deadline

from . import search
from .claims import ClaimSpec
from .diagnosis import SEARCH_BUDGET, Verdict, candidates, unsatisfiable
from .index import Index
from .quirks import before
from .selection import Selection
from .units import Units, cannot

__all__ = ["SEARCH_BUDGET", "Verdict", "candidates", "check"]


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
    selection = Selection(index)
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
    units = Units(index, spec, selection, (index.shadow_nodes | skip) if allocatable_only else skip)
    # 1.34 stops with an error where its search reaches an invalid pool: only the search knows where.
    quick = not any(r.mode == "All" for r in units.reqs) and not (index.invalid_pools and before(index.release, 35))

    failed: list = []  # (node, why) of nodes only that one fails: invalid pools (ErrFailedAllocationOnNode)

    def decide(now: bool):
        count, example, errors, undecided, binding = 0, None, [], 0, False
        passes: dict = {}
        for nodes, view, exact, gi in units:
            deadline.check()
            if quick and not exact and cannot(spec, units.histogram(gi, view), index, selection, now, passes):
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
    verdict = unsatisfiable(spec, index, selection, undecided, notes, count_nodes, decide)
    if failed:  # surfaced as the scheduler does: only because no node can take the pod
        node, message = failed[0]
        verdict.message = f"node {node} is unschedulable ({message}); no other node can hold it: {verdict.message}"
    return verdict
