"""Escaped Kueue queue budgets between audits: every round, Kueue's ClusterQueues, LocalQueues,
Workloads and their namespaces' pods (read), the claims the live inventory watches, and Kueue's
configuration as KueueWatch last read it, judged by migration.queue_use: the devices a queue's
pods hold that its GPU quota does not count, as `dra_bridge_queue_budget_escaped_devices`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.common import BridgeError, Throttled, by_kind, view_of
from app.migration import extended_resources, queue_use

from .budget_watch import log_problems
from .metrics import set_series
from .periodic import Periodic
from .service import ServiceState

log = logging.getLogger("dra_bridge.queue_budgets")


class QueueBudgetWatch(Periodic):
    name = "queue-budget-watch"

    def __init__(self, state: ServiceState, read: Callable[[], list[dict]], interval_s: float = 120.0):
        super().__init__(interval_s)
        self.state, self.read = state, read  # read() -> Kueue's queue objects and their pods (kube.read_queues)
        self._seen: set[tuple[str, str]] = set()
        self._failures = Throttled(log)

    def run_once(self) -> dict[tuple[str, str], int] | None:
        """(ClusterQueue, resource) -> escaped devices; None while the live inventory is not
        synced or Kueue's queues could not be read (the last values stay, the failure counted)."""
        live = self.state.live
        if live is None or not live.ready:
            return None
        try:
            objects = self.read()
        except BridgeError as exc:
            self.failed()
            self._failures.failed("%s: queue budgets not judged this round", exc)
            return None
        self._failures.recovered("Kueue's queues are readable again")
        found = by_kind(objects)
        pods = found.get("Pod", [])
        claims = [c for namespace in sorted({view_of(p).namespace for p in pods})
                  for c in live.claims_in(namespace)]
        migration = self.state.policy.policy.migration
        uses = queue_use(found.get("ClusterQueue", []), found.get("LocalQueue", []), found.get("Workload", []),
                         pods, claims, migration, extended_resources(self.state.index().classes), self.state.kueue,
                         migration.kueueDeviceClasses)
        escaped = {(use.queue, use.resource): use.escaped for use in uses}
        # A queue gone, or no longer with a GPU quota, loses its series.
        self._seen = set_series(self.state.metrics.queue_budget_escaped, self._seen, escaped)
        log_problems(log, uses)
        return escaped

    def failed(self) -> None:
        self.state.metrics.kueue_read_failures.inc()
