"""The priorities GPU pods run at, for the path choice's preemption check: read every round from
the cluster's running pods (what the Priority admission plugin set on each) into
`ServiceState.gpu_pods`. Without them every PriorityClass but the system- ones stands for GPU
pods, which keeps more pods on the device plugin, never fewer: a failed read is logged and the
last good set kept."""

from __future__ import annotations

import logging

from app.common import Throttled
from app.migration import gpu_pod_priorities

from .periodic import Periodic
from .service import ServiceState

log = logging.getLogger("dra_bridge.gpu_priorities")


class GpuPriorityWatch(Periodic):
    name = "gpu-priorities"
    first_round_at_once = True

    def __init__(self, state: ServiceState, read, interval_s: float = 60.0):
        super().__init__(interval_s)
        self.state, self.read = state, read  # read() -> the cluster's running pods
        self._failures = Throttled(log)

    def run_once(self):
        try:  # read() may read as it is consumed: what it yields is reduced page by page
            found = gpu_pod_priorities(self.read(), self.state.policy.policy.migration)
        except Exception as exc:  # noqa: BLE001 - the API down or RBAC: the last set stays
            self._failures.failed("cannot read the priorities GPU pods run at (%s): the last ones read stay", exc)
            return self.state.gpu_pods
        self._failures.recovered("the priorities GPU pods run at are readable again")
        if found != self.state.gpu_pods:  # a new object only on change: decisions keyed on it stay
            log.info("GPU pods run at %d distinct priorities", len(found))
            self.state.gpu_pods = found
        return found
