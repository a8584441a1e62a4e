"""A pod's GPU asks, parsed once: each container's legacy extended resources with where they
are written and the container's role, and the projections every counter reads, so the kubelet's
view, ResourceQuota's charge, rollout room and the admin rules agree on one pod. Pure.

Upstream's rules (pkg/api/v1/resource PodRequests, the quota pod evaluator): a request defaults to
its limit (extended resources may not differ); the pod takes the larger of its init peak (an
init container's ask beside the restartable sidecars started before it) and the sum of its
regular containers and sidecars. Ephemeral containers ask for nothing."""

from __future__ import annotations

from dataclasses import dataclass

from app.common import submap
from app.common import count_or_none

REGULAR, INIT, SIDECAR = "regular", "init", "sidecar"


@dataclass(frozen=True)
class Ask:
    container: str
    role: str  # regular | init | sidecar (an init container with restartPolicy: Always)
    path: str  # spec.<list>[<index>].resources: where it is written
    resource: str
    amount: object  # as written: the limit, else the request (asked())
    order: int  # position among init containers (their start order); regular containers: -1

    @property
    def count(self) -> int:
        """The whole number it asks for (0 where it is not one: the API server refuses such pods)."""
        return count_or_none(self.amount) or 0


@dataclass(frozen=True)
class PodAsks:
    asks: tuple[Ask, ...]

    def resources(self) -> list[str]:
        return sorted({a.resource for a in self.asks})

    def effective(self, resource: str) -> int:
        """What the kubelet admits and ResourceQuota charges the pod for `resource`."""
        sidecars = init_peak = 0
        for ask in sorted((a for a in self.asks if a.role != REGULAR), key=lambda a: a.order):
            if ask.resource != resource:
                continue
            if ask.role == SIDECAR:
                sidecars += ask.count
                init_peak = max(init_peak, sidecars)
            else:
                init_peak = max(init_peak, sidecars + ask.count)
        regular = sum(a.count for a in self.asks if a.role == REGULAR and a.resource == resource)
        return max(regular + sidecars, init_peak)

    def counts(self) -> dict[str, int]:
        """resource -> effective count, for every resource it asks for (zeros left out)."""
        return {r: n for r in self.resources() if (n := self.effective(r))}


def asked(resources: dict) -> dict:
    """resource -> amount a container asks, one way for every reader: the limit where one is
    written, else the request. The API server refuses extended resources whose two differ, but a
    rewrite at admission removes them first, so the rewrite's reading (the limit) is everyone's."""
    limits, requests = submap(resources, "limits"), submap(resources, "requests")
    return {**requests, **limits}


def pod_asks(spec: dict, wanted) -> PodAsks:
    """The asks of a pod spec for the resources `wanted(resource)` says are legacy GPU ones."""
    out = []
    order = 0
    for list_name in ("initContainers", "containers"):
        containers = spec.get(list_name) if isinstance(spec, dict) else None
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            if not isinstance(container, dict):
                continue
            role = REGULAR if list_name == "containers" else \
                SIDECAR if container.get("restartPolicy") == "Always" else INIT
            for resource, amount in asked(submap(container, "resources")).items():
                if wanted(str(resource)):
                    out.append(Ask(str(container.get("name")), role, f"spec.{list_name}[{index}].resources",
                                   str(resource), amount, order if role != REGULAR else -1))
            if role != REGULAR:
                order += 1
    return PodAsks(tuple(out))
