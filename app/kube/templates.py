"""ResourceClaimTemplates created on demand through the API.

What exists is known from our own creates and from the template watch (list, then watch), never
from a timer: a hit makes no call, and a burst of reviews needing one missing template makes one
API call that the others wait on (single flight). Calls run on writer threads of their own, so a
review never holds a review worker while the API server answers (and calls our /validate)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import TemplateEnsureError, view_of
from app.common import release as releases

from .client import api_message, within


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


def _is_ours(template: dict, existing: dict) -> bool:
    labels = view_of(existing).labels
    ours = template["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in ours.items()) and same_spec(template["spec"], existing.get("spec"))


def _key(template: dict) -> tuple[str, str]:
    meta = template["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _seen(obj: dict) -> tuple[tuple[str, str], dict]:
    """(key, what is compared with ours) of a template as the API serves it."""
    view = view_of(obj)
    return view.key(), {"metadata": {"labels": view.labels}, "spec": obj.get("spec")}


def _done(error: TemplateEnsureError | None) -> Future:
    future: Future = Future()
    future.set_result(error)
    return future


class TemplateStore:
    """Creates ResourceClaimTemplates on demand; knows which exist so hits make no call."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, namespace_allowed=None,
                 writers: int = 8, on_create: Callable[[], None] | None = None,
                 on_dropped: Callable[[list[str]], None] | None = None):
        """namespace_allowed(namespace) -> bool: may templates be written there (the namespaces
        the webhook configurations select)? A forged review cannot make us write elsewhere.
        on_create: called once per create call made to the API; on_dropped(gates): a create the
        server stored without fields of those gates."""
        self.api = client.ResourceV1Api(api) if api is not None else None
        self.namespace_allowed = namespace_allowed
        self.timeout_s = timeout_s
        self.on_create, self.on_dropped = on_create, on_dropped
        # key -> None when confirmed ours; the watched object while only the watch has seen it.
        self._known: dict[tuple, dict | None] = {}
        self._inflight: dict[tuple, Future] = {}
        self._lock = threading.Lock()
        self._writers = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="template-write")
        self.offline: dict[tuple, dict] = {}
        self.conflicts = 0
        self.creates = 0

    # -- what the watch tells us -------------------------------------------------------------
    def observe(self, obj: dict) -> None:
        """The watch saw this template (added or modified): compared with ours when a pod needs it."""
        key, seen = _seen(obj)
        with self._lock:
            self._known[key] = seen

    def forget(self, key: tuple) -> None:
        """A template deleted by anyone: the next pod pointed at it creates it again."""
        with self._lock:
            self._known.pop(key, None)
        self.offline.pop(key, None)

    def resync(self, objects: list[dict]) -> None:
        """A fresh list: exactly these exist (deletes missed while the watch was down are forgotten)."""
        listed = dict(map(_seen, objects))
        with self._lock:
            for key in list(self._known):
                if key not in listed:
                    del self._known[key]
            for key, obj in listed.items():
                if key not in self._known:
                    self._known[key] = obj

    # -- what reviews ask ----------------------------------------------------------------------
    def cached(self, template: dict) -> bool:
        """Known to exist as ours: nothing to do."""
        key = _key(template)
        return key in self._known and self._known[key] is None

    def submit(self, template: dict) -> Future:
        """A Future whose result is None once the template exists as ours, or the
        TemplateEnsureError saying why not (never raised: many reviews may wait on one call)."""
        key = _key(template)
        with self._lock:
            if key in self._known:
                seen = self._known[key]
                if seen is None:
                    return _done(None)
                if _is_ours(template, seen):  # seen by the watch: compared here, no call
                    self._known[key] = None
                    return _done(None)
                self.conflicts += 1
                return _done(_conflict(key))
            running = self._inflight.get(key)
            if running is not None:
                return running
            future = self._writers.submit(self._ensure_now, key, template)
            self._inflight[key] = future
        future.add_done_callback(lambda _f: self._landed(key, _f))
        return future

    def _landed(self, key: tuple, future: Future) -> None:
        with self._lock:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            if future.result() is None:
                self._known[key] = None

    def ensure(self, template: dict) -> None:
        """Blocking form of `submit`: TemplateEnsureError when the API does not confirm it."""
        error = self.submit(template).result()
        if error is not None:
            raise type(error)(str(error))

    def _ensure_now(self, key: tuple, template: dict) -> TemplateEnsureError | None:
        try:
            self._create(key, template)
        except TemplateEnsureError as exc:
            return exc
        return None

    def _create(self, key: tuple, template: dict) -> None:
        if self.api is not None and self.namespace_allowed is not None and not self.namespace_allowed(key[0]):
            raise TemplateEnsureError(f"namespace {key[0]!r} is not one the webhook serves: no template written there")
        self.creates += 1
        if self.on_create:
            self.on_create()
        if self.api is None:
            # No cluster configured (local demo): keep it in memory so `plan`-like output is possible.
            self.offline[key] = template
            return
        try:
            stored = within(self.timeout_s, self._create_call, key[0], template)
        except ApiException as exc:
            if exc.status != 409:
                raise TemplateEnsureError(api_message(exc)) from exc
            self._check_existing(key, template)  # the name is predictable: is what exists ours?
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"API unreachable or too slow: {type(exc).__name__}") from exc
        else:
            self._verify(key, template, stored)

    def _create_call(self, namespace: str, template: dict) -> bytes:
        """The create, and the answer read within the same deadline: the object as stored, raw
        (a client model would drop fields it does not know)."""
        return self.api.create_namespaced_resource_claim_template(
            namespace, template, _request_timeout=self.timeout_s, _preload_content=False).data

    def _verify(self, key: tuple, template: dict, stored: bytes) -> None:
        """The API server drops the fields of DRA gates that are off there without a word: a
        template that lost one would give pods less than they asked. It is deleted, and the
        create fails naming the field and the gate (the policy's onTemplateError decides)."""
        try:
            answer = orjson.loads(stored)
        except (orjson.JSONDecodeError, TypeError):
            return  # an answer we cannot read proves nothing either way
        lost = releases.dropped(template, answer, "ResourceClaimTemplate") if isinstance(answer, dict) else []
        if not lost:
            return
        if self.on_dropped:
            self.on_dropped([x.gate for x in lost])
        try:
            within(self.timeout_s, self.api.delete_namespaced_resource_claim_template, key[1], key[0],
                   _request_timeout=self.timeout_s)
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            pass  # said below either way; the template collector removes what is left
        raise TemplateEnsureError(f"the API server dropped {', '.join(map(str, lost[:3]))} from ResourceClaimTemplate "
                                  f"{key[0]}/{key[1]}: that gate is off there; the template was removed")

    def _check_existing(self, key: tuple, template: dict) -> None:
        try:
            existing = self.api.api_client.sanitize_for_serialization(within(
                self.timeout_s, self.api.read_namespaced_resource_claim_template, key[1], key[0],
                _request_timeout=self.timeout_s))
        except ApiException as exc:
            raise TemplateEnsureError(f"template exists; reading it back: API answered {exc.status}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"template exists; reading it back: API unreachable or too slow: "
                                      f"{type(exc).__name__}") from exc
        if not _is_ours(template, existing):
            with self._lock:
                self.conflicts += 1
            raise _conflict(key)


def _conflict(key: tuple) -> TemplateConflict:
    return TemplateConflict(f"ResourceClaimTemplate {key[0]}/{key[1]} exists but is not the one dra-bridge "
                            "generates (different spec or labels): not used")
