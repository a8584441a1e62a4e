"""Namespace labels for policy selectors, read through the API and cached briefly."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import view_of
from .client import each_item, list_pages, within

log = logging.getLogger("dra_bridge.kube")


class NamespaceLookupError(Exception):
    """The labels of a namespace are not known: the API failed and nothing was read before."""


class NamespaceLabels:
    """Namespace labels, cached for `ttl_s`. A failed read never becomes an answer: the last
    labels read stay in force (a failure must not change which policy applies), and with none
    the caller gets NamespaceLookupError. After a failure (429 or not) the API is not asked
    again for that namespace for `retry_s`, so an outage does not cost every review a timeout."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 60.0,
                 retry_s: float = 5.0, max_entries: int = 20_000):
        self.api = client.CoreV1Api(api) if api is not None else None
        self.timeout_s, self.ttl_s, self.retry_s, self.max_entries = timeout_s, ttl_s, retry_s, max_entries
        self._labels: OrderedDict[str, tuple[float, dict]] = OrderedDict()  # name -> (fresh until, labels)
        self._retry_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self.failures = 0

    def get(self, namespace: str) -> dict[str, str]:
        if self.api is None or not namespace:
            return {}
        now = time.monotonic()
        with self._lock:
            known = self._labels.get(namespace)
            retry_at = self._retry_at.get(namespace, 0.0)
        if known and known[0] > now:
            return known[1]
        if retry_at > now:
            return self._last_known(namespace, known, "the API failed moments ago")
        try:
            ns = within(self.timeout_s, self.api.read_namespace, namespace, _request_timeout=self.timeout_s)
            labels = dict(ns.metadata.labels or {})
        except ApiException as exc:
            if exc.status == 404:
                labels = {}  # no such namespace (yet): no labels is the truth, not a failure
            else:
                return self._failed(namespace, known, f"API answered {exc.status}", now)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return self._failed(namespace, known, type(exc).__name__, now)
        with self._lock:
            self._retry_at.pop(namespace, None)
            self._labels[namespace] = (now + self.ttl_s, labels)
            self._labels.move_to_end(namespace)
            while len(self._labels) > self.max_entries:
                self._labels.popitem(last=False)
        return labels

    def _failed(self, namespace: str, known, why: str, now: float) -> dict[str, str]:
        self.failures += 1
        with self._lock:
            self._retry_at[namespace] = now + self.retry_s
            if len(self._retry_at) > self.max_entries:
                self._retry_at.clear()
        log.warning("cannot read labels of namespace %s: %s", namespace, why)
        return self._last_known(namespace, known, why)

    @staticmethod
    def _last_known(namespace: str, known, why: str) -> dict[str, str]:
        if known is None:
            raise NamespaceLookupError(f"labels of namespace {namespace!r} are unknown ({why})")
        return known[1]


RUNNING = "status.phase!=Succeeded,status.phase!=Failed"


def running_pods(api: client.ApiClient, page_size: int = 500) -> Iterator[dict]:
    """Every pod not finished, cluster-wide, read a page at a time as it is consumed (errors
    come from the iteration)."""
    return each_item(api, "/api/v1/pods", None, page_size, fields=RUNNING)


def opted_in_pods(api: client.ApiClient, selector: str | None,
                  page_size: int = 500) -> tuple[dict[str, dict], Iterator[dict]]:
    """(name -> labels of the namespaces `selector` picks (None: all), their pods still running,
    read a page at a time as they are consumed); ApiException or a connection error when the API
    does not answer (from the iteration, for the pods)."""
    namespaces = {view_of(n).name: view_of(n).labels
                  for n in list_pages(api, "/api/v1/namespaces", selector, page_size)[0]}
    pods = (pod for name in sorted(namespaces)
            for pod in each_item(api, f"/api/v1/namespaces/{name}/pods", None, page_size, fields=RUNNING))
    return namespaces, pods
