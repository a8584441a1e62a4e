"""Concurrent pod creation against the real API server, as a scale-up sends it: `clients`
keep-alive HTTPS clients share `pods` creates. Used by the burst tests and the admission bench."""

from __future__ import annotations

import math
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx


@dataclass
class Created:
    latency_s: float
    status: int
    pod: dict
    warnings: list[str]


@dataclass
class Burst:
    created: list[Created]
    wall_s: float
    allocated: int = 0  # claims the scheduler had allocated when the burst was done (the bench)

    @property
    def latencies(self) -> list[float]:
        return [c.latency_s for c in self.created]

    @property
    def per_second(self) -> float:
        return len(self.created) / self.wall_s

    def median(self) -> float:
        return quantile(self.latencies, 0.5)

    def p99(self) -> float:
        return quantile(self.latencies, 0.99)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def create_pods(cluster, namespace: str, pods: list[dict], clients: int) -> Burst:
    context = ssl.create_default_context(cafile=str(cluster.ca))
    headers = {"Authorization": f"Bearer {cluster.admin_token}"}
    url = f"{cluster.server}/api/v1/namespaces/{namespace}/pods"
    sessions = [httpx.Client(verify=context, headers=headers, timeout=30) for _ in range(clients)]

    def one(i: int) -> Created:
        started = time.monotonic()
        response = sessions[i % clients].post(url, json=pods[i])
        took = time.monotonic() - started
        return Created(took, response.status_code, response.json() if response.status_code == 201 else
                       {"error": response.text[:300]}, response.headers.get_list("warning"))

    try:
        for s in sessions:  # connections open before the clock starts, as long-lived clients hold them
            s.get(f"{cluster.server}/readyz")
        started = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            created = list(pool.map(one, range(len(pods))))
        return Burst(created, time.monotonic() - started)
    finally:
        for s in sessions:
            s.close()
