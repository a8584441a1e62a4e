"""A periodic, cheap count of pods the webhook should have rewritten but never saw (a review
lost to failurePolicy Ignore): `dra_bridge_unmigrated_pods{pod_namespace}`, what the fail-open
alert's consequence is measured by. The pods come from `read` (IO: app.kube); which of them
count is migration.unmigrated's decision, the webhook's own."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from app.application import per_namespace, unmigrated

from .periodic import Periodic
from .service import ServiceState

log = logging.getLogger("dra_bridge.unmigrated")

# () -> (opted-in namespace name -> labels, their pods: any iterable, consumed once)
Read = Callable[[], tuple[dict[str, dict], Iterable[dict]]]


class UnmigratedCount(Periodic):
    name = "unmigrated-count"

    def __init__(self, state: ServiceState, read: Read, opt_in, interval_s: float = 120.0):
        super().__init__(interval_s)
        self.state, self.read, self.opt_in = state, read, opt_in
        self._counted: set[str] = set()

    def run_once(self) -> dict[str, int] | None:
        """Count now; None when the inventory is not synced or the pods could not be read (the
        last count stays, its timestamp says how old it is)."""
        if not self.state.readiness()[1]["inventory"]:
            return None
        metrics = self.state.metrics
        try:  # the pods may be read as they are consumed: counted page by page, none kept
            namespaces, pods = self.read()
            counts = per_namespace(unmigrated(pods, namespaces, self.state.policy.policy,
                                              self.state.cluster_facts(self.state.path_facts()), self.opt_in))
        except Exception as exc:  # noqa: BLE001 - counted, logged, tried again next round
            metrics.unmigrated_failures.inc()
            log.warning("could not count unmigrated pods: %s", exc)
            return None
        for namespace in self._counted - set(namespaces):
            metrics.unmigrated.remove(namespace)  # no longer opted in
        for namespace in namespaces:  # 0 where none: the alert resolves, the series stays
            metrics.unmigrated.labels(namespace).set(counts.get(namespace, 0))
        self._counted = set(namespaces)
        metrics.unmigrated_counted.set(time.time())
        if counts:
            log.warning("%d running pod(s) hold device-plugin GPUs the webhook would rewrite now: %s",
                        sum(counts.values()), ", ".join(f"{n} ({c})" for n, c in sorted(counts.items())[:10]))
        return counts

    def failed(self) -> None:
        self.state.metrics.unmigrated_failures.inc()
