"""Namespace labels for policy selectors, read through the API and cached briefly."""

from __future__ import annotations

import logging
import time

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("dra_bridge.kube")


class NamespaceLabels:
    """Namespace labels for policy selectors, cached briefly; {} when there is no cluster."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 60.0):
        self.api = client.CoreV1Api(api) if api is not None else None
        self.timeout_s, self.ttl_s = timeout_s, ttl_s
        self._cache: dict[str, tuple[float, dict]] = {}

    def get(self, namespace: str) -> dict[str, str]:
        if self.api is None or not namespace:
            return {}
        hit = self._cache.get(namespace)
        if hit and hit[0] > time.monotonic():
            return hit[1]
        try:
            ns = self.api.read_namespace(namespace, _request_timeout=self.timeout_s)
            labels = dict(ns.metadata.labels or {})
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("cannot read labels of namespace %s: %s", namespace, type(exc).__name__)
            labels = hit[1] if hit else {}
        self._cache[namespace] = (time.monotonic() + self.ttl_s, labels)
        return labels
