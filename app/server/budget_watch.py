"""Escaped GPU budgets between audits: every round, from the live inventory (its ResourceQuotas'
device limits, DeviceClasses and ResourceClaims), the devices claims hold that no key of their
namespace's GPU quota counts (migration.quota_use), as `dra_bridge_budget_escaped_devices`."""

from __future__ import annotations

import logging

from app.migration import extended_resources, quota_use

from .metrics import set_series
from .periodic import Periodic
from .service import ServiceState

log = logging.getLogger("dra_bridge.budgets")


class BudgetWatch(Periodic):
    name = "budget-watch"

    def __init__(self, state: ServiceState, interval_s: float = 120.0):
        super().__init__(interval_s)
        self.state = state
        self._seen: set[tuple[str, str]] = set()

    def run_once(self) -> dict[tuple[str, str], int] | None:
        """(namespace, quota) -> escaped devices; None while the live inventory is not synced."""
        live = self.state.live
        if live is None or not live.ready:
            return None
        index = self.state.index()
        quotas = [{"metadata": {"namespace": namespace, "name": name}, "spec": {"hard": hard}}
                  for namespace, entries in (index.quotas or {}).items() for name, hard in entries]
        claims = [c for namespace in sorted({q["metadata"]["namespace"] for q in quotas})
                  for c in live.claims_in(namespace)]
        uses = quota_use(quotas, [], claims, self.state.policy.policy.migration, extended_resources(index.classes))
        escaped: dict[tuple[str, str], int] = {}
        for use in uses:
            key = (use.namespace, use.quota)
            escaped[key] = escaped.get(key, 0) + use.escaped
        # A quota gone, or no longer limiting GPUs, loses its series.
        self._seen = set_series(self.state.metrics.budget_escaped, self._seen, escaped)
        log_problems(log, uses)
        return escaped


def log_problems(logger: logging.Logger, uses) -> None:
    """A warning per budget that devices escape (its `problem`)."""
    for use in uses:
        if use.problem:
            logger.warning("%s", use.problem)
