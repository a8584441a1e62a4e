"""ResourceClaimTemplates created on demand through the API, remembered so hits make no call."""

from __future__ import annotations

import threading
import time

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import TemplateEnsureError

from .client import api_message, within


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


class TemplateConflict(TemplateEnsureError):
    """A template of the generated name exists with content we did not generate."""


# Fields the API server fills in a DeviceRequest when left out, with the value it fills.
_DEFAULTED = {"allocationMode": "ExactCount", "count": 1}


def same_spec(ours, theirs) -> bool:
    """`theirs` (as the API serves it) is `ours` plus only the API server's defaults."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return False
        for k, v in theirs.items():
            if k not in ours and not (_DEFAULTED.get(k, object()) == v or (k == "metadata" and not v)
                                      or (k == "creationTimestamp" and v is None)):
                return False
        return all(same_spec(v, theirs.get(k)) for k, v in ours.items())
    if isinstance(ours, list):
        return isinstance(theirs, list) and len(ours) == len(theirs) and all(map(same_spec, ours, theirs))
    return ours == theirs


class TemplateStore:
    """Creates ResourceClaimTemplates on demand; remembers what exists so hits make no call."""

    # A template deleted out of band is recreated within ttl_s: the next pod after that re-creates
    # it (AlreadyExists, read back and compared, when it still exists).
    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 60.0,
                 namespace_allowed=None):
        """namespace_allowed(namespace) -> bool: may templates be written there (the namespaces
        the webhook configurations select)? A forged review cannot make us write elsewhere."""
        self.api = client.ResourceV1Api(api) if api is not None else None
        self.namespace_allowed = namespace_allowed
        self.timeout_s = timeout_s
        self.known = _TTLSet(ttl_s)
        self.offline: dict[tuple, dict] = {}
        self.conflicts = 0

    @property
    def is_offline(self) -> bool:
        return self.api is None

    def forget(self, key: tuple) -> None:
        """A template deleted out of band: the next pod pointed at it creates it again."""
        self.known.discard(key)
        self.offline.pop(key, None)

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
        if self.namespace_allowed is not None and not self.namespace_allowed(key[0]):
            raise TemplateEnsureError(f"namespace {key[0]!r} is not one the webhook serves: no template written there")
        try:
            within(self.timeout_s, self.api.create_namespaced_resource_claim_template,
                   key[0], template, _request_timeout=self.timeout_s)
        except ApiException as exc:
            if exc.status != 409:
                raise TemplateEnsureError(api_message(exc)) from None
            self._check_existing(key, template)  # the name is predictable: is what exists ours?
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"API unreachable or too slow: {type(exc).__name__}") from None
        self.known.add(key)

    def _check_existing(self, key: tuple, template: dict) -> None:
        try:
            existing = self.api.api_client.sanitize_for_serialization(within(
                self.timeout_s, self.api.read_namespaced_resource_claim_template, key[1], key[0],
                _request_timeout=self.timeout_s))
        except ApiException as exc:
            raise TemplateEnsureError(f"template exists; reading it back: API answered {exc.status}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"template exists; reading it back: API unreachable or too slow: "
                                      f"{type(exc).__name__}") from None
        labels = (existing.get("metadata") or {}).get("labels") or {}
        ours = template["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in ours.items()) or not same_spec(template["spec"], existing.get("spec")):
            self.conflicts += 1
            raise TemplateConflict(f"ResourceClaimTemplate {key[0]}/{key[1]} exists but is not the one dra-bridge "
                                   "generates (different spec or labels): not used")
