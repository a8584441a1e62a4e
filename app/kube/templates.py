"""ResourceClaimTemplates created on demand through the API, remembered so hits make no call."""

from __future__ import annotations

import threading
import time

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import TemplateEnsureError


class _TTLSet:
    def __init__(self, ttl_s: float, max_entries: int = 50_000):
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._items: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def __contains__(self, key: tuple) -> bool:
        expires = self._items.get(key)
        return expires is not None and expires > time.monotonic()

    def add(self, key: tuple) -> None:
        with self._lock:
            if len(self._items) >= self.max_entries:
                self._items.clear()  # rare; a miss only costs one idempotent create
            self._items[key] = time.monotonic() + self.ttl_s

    def discard(self, key: tuple) -> None:
        with self._lock:
            self._items.pop(key, None)


class TemplateStore:
    """Creates ResourceClaimTemplates on demand; remembers what exists so hits make no call."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 600.0):
        self.api = client.ResourceV1Api(api) if api is not None else None
        self.timeout_s = timeout_s
        self.known = _TTLSet(ttl_s)
        self.offline: dict[tuple, dict] = {}

    @property
    def is_offline(self) -> bool:
        return self.api is None

    def cached(self, template: dict) -> bool:
        meta = template["metadata"]
        return (meta.get("namespace", ""), meta["name"]) in self.known

    def ensure(self, template: dict) -> None:
        """Make sure the template exists; TemplateEnsureError when the API does not confirm it."""
        meta = template["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.known:
            return
        if self.api is None:
            # No cluster configured (local demo): keep it in memory so `plan`-like output is possible.
            self.offline[key] = template
            self.known.add(key)
            return
        try:
            self.api.create_namespaced_resource_claim_template(
                key[0], template, _request_timeout=self.timeout_s)
        except ApiException as exc:
            if exc.status != 409:
                raise TemplateEnsureError(f"API answered {exc.status} {exc.reason or ''}".strip()) from None
            # AlreadyExists: another replica or an earlier pod created it. Same name, same spec.
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"API unreachable or too slow: {type(exc).__name__}") from None
        self.known.add(key)
