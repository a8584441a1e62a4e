"""Kueue's configuration for the path choice: its deviceClassMappings and DRA gate, read every
round from the cluster (kube.read_kueue) into `ServiceState.kueue`. Kueue reads its own
configuration only when it starts: restart it after changing the ConfigMap, as its docs say.

A round that cannot read it (no RBAC, API down) leaves `kueue` None: pods Kueue admits by
itself are then rewritten only onto the classes the policy lists (migration.kueueDeviceClasses),
never onto more, so a failed read keeps budgets, not pods, safe."""

from __future__ import annotations

import logging

from app.common import BridgeError, Throttled

from .periodic import Periodic
from .service import ServiceState

log = logging.getLogger("dra_bridge.kueue")


class KueueWatch(Periodic):
    name = "kueue-watch"
    first_round_at_once = True

    def __init__(self, state: ServiceState, read, interval_s: float = 60.0):
        super().__init__(interval_s)
        self.state, self.read = state, read  # read() -> KueueView | None
        self._failures = Throttled(log)

    def run_once(self):
        try:
            view = self.read()
        except BridgeError as exc:
            self.state.metrics.kueue_read_failures.inc()
            self._failures.failed("%s: pods Kueue admits by itself are rewritten only onto "
                                  "migration.kueueDeviceClasses", exc)
            view = None
        else:
            self._failures.recovered("Kueue's configuration is readable again")
        if view != self.state.kueue:  # a new object only on change: decisions keyed on it stay
            log.info("Kueue configuration: %s", "not installed or not readable" if view is None else
                     f"maps {dict(view.mappings)}, DRA gate {'on' if view.dra_gate else 'off'}")
            self.state.kueue = view
        return view

