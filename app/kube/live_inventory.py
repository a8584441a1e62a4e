"""Live inventory: list + watch ResourceSlices, DeviceClasses, ResourceClaims and Nodes. IO.

Resumes each watch from its last resourceVersion, relists on 410 Gone, and reports
readiness false until every list has synced and while a watch has been failing for longer
than `stale_after_s`. Of a Node only its name, labels (what nodeSelectors match), the
extended resources it takes pods for (what device plugins advertise) and whether it is Ready
are kept; an event that changes none of these (a status heartbeat) changes nothing. Of a
ResourceQuota only its hard limits on extended resources and DeviceClasses are kept (its
`used` changes with every pod). The index is kept by an injected factory (DRA semantics are
not ours to know here): `make_index(slices, classes, claims, nodes, node_resources, quotas,
taint_rules, cordoned, not_ready, priority_classes, leaving, previous=)` (slices and claims as
kept, packed: app.common.packed; previous: the object it replaces) returns an object with
`index`, and `slice_changed(name, packed)` / `claim_changed(key, packed)` that apply one event
and return the new index, or None when only a full build can. A background thread applies what
changed, at most once per `rebuild_interval_s`: a review never waits, it reads the newest index
(only the very first is built on demand).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import threading
import time
from collections.abc import Callable

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import (Backoff, device_quota, extended_allocatable, leaving_dra, not_ready, pack, Throttled, unpack,
                        view_of)

from .client import pages, raw_get, watch_events, why_failed

log = logging.getLogger("dra_bridge.live")
RESOURCES = ("resourceslices", "deviceclasses", "resourceclaims", "nodes", "resourcequotas", "devicetaintrules",
             "priorityclasses")
INCREMENTAL = ("resourceslices", "resourceclaims")  # the rest (classes, nodes, quotas, rules): full builds
# Served only from Kubernetes 1.37 (resource.k8s.io/v1): where the API has none, there are none;
# the list is tried again every `absent_retry_s` (the cluster may be upgraded).
OPTIONAL = ("devicetaintrules", "priorityclasses")  # the second: API fakes without it
PATHS = {"nodes": "/api/v1/nodes", "resourcequotas": "/api/v1/resourcequotas",
         "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses"}


class _Gone(Exception):
    pass


def _return_free_memory() -> None:
    """After a full build most of what decoding allocated is free but still mapped: hand it back
    (glibc's malloc_trim), so the pod's RSS is what the index needs, not its build's peak."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to do


class LiveInventory:
    def __init__(self, api: client.ApiClient,
                 make_index: Callable[..., object],
                 watch_timeout_s: int = 300, stale_after_s: float = 60.0,
                 rebuild_interval_s: float = 1.0, backoff_s: float = 1.0, page_size: int = 500,
                 absent_retry_s: float = 300.0):
        self.api, self.make_index = api, make_index
        self.watch_timeout_s, self.stale_after_s = watch_timeout_s, stale_after_s
        self.rebuild_interval_s, self.backoff_s, self.page_size = rebuild_interval_s, backoff_s, page_size
        self.absent_retry_s = absent_retry_s
        # Objects kept packed (app.common.packed): a fraction of the memory of decoded dicts.
        self.objects: dict[str, dict[str, bytes]] = {r: {} for r in RESOURCES}
        self.synced: dict[str, bool] = {r: False for r in RESOURCES}
        self.failing_since: dict[str, float | None] = {r: None for r in RESOURCES}
        self.relists = 0
        self._lock = threading.Lock()
        self._version = 0
        self._built: tuple[int, object] | None = None
        self._live = None  # what make_index returned
        # Keys changed since the last build, for the kinds applied one by one.
        self._dirty: dict[str, set[str]] = {r: set() for r in INCREMENTAL}
        self._full = True  # a relist, or classes or nodes changed: build from scratch
        self._build_lock = threading.Lock()
        self._changed = threading.Event()
        self.builds = self.full_builds = 0
        # Called (builder thread) once a full build's index is published: whoever keeps things
        # per index lets the old one go now, not at its next read.
        self.on_full_build: Callable[[], None] | None = None
        self.last_build_s = 0.0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- readiness and data -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        now = time.monotonic()
        return all(self.synced.values()) and not any(
            since is not None and now - since > self.stale_after_s for since in self.failing_since.values())

    def index(self):
        """The newest index built; only the first is built here, on demand."""
        if self._built is None:
            with self._build_lock:
                if self._built is None:
                    self._build()
        return self._built[1]

    def _build(self) -> None:
        started = time.monotonic()
        with self._lock:
            version, full = self._version, self._full or self._live is None
            changed = {r: {k: self.objects[r].get(k) for k in keys} for r, keys in self._dirty.items()}
            for keys in self._dirty.values():
                keys.clear()
            self._full = False
        index = None if full else self._apply_changes(changed)
        rebuilt = index is None
        if rebuilt:
            index = self._rebuild()
        self._built = (version, index)
        self.builds += 1
        self.last_build_s = time.monotonic() - started
        if rebuilt and self.on_full_build is not None:
            self.on_full_build()

    def claims_in(self, namespace: str) -> list[dict]:
        """The namespace's ResourceClaims as last watched (the admin rules' namespace totals)."""
        prefix = namespace + "/"
        with self._lock:
            kept = [raw for key, raw in self.objects["resourceclaims"].items() if key.startswith(prefix)]
        return [unpack(raw) for raw in kept]

    def _rebuild(self):
        # Decoded one at a time as the builder takes them: the whole inventory is never decoded.
        with self._lock:
            slices = list(self.objects["resourceslices"].values())
            classes = {c["metadata"]["name"]: c for c in map(unpack, self.objects["deviceclasses"].values())}
            claims = list(self.objects["resourceclaims"].items())
            kept_nodes = [unpack(b) for b in self.objects["nodes"].values()]
            strings: dict[str, str] = {}  # label keys and values repeat across nodes: held once
            nodes = {n["metadata"]["name"]: {strings.setdefault(k, k): strings.setdefault(v, v)
                                             for k, v in n["metadata"]["labels"].items()} for n in kept_nodes}
            resources = {n["metadata"]["name"]: n["allocatable"] for n in kept_nodes}
            cordoned = frozenset(n["metadata"]["name"] for n in kept_nodes if n.get("unschedulable"))
            unready = frozenset(n["metadata"]["name"] for n in kept_nodes if n.get("notReady"))
            leaving = frozenset(n["metadata"]["name"] for n in kept_nodes if n.get("leaving"))
            quotas = [unpack(b) for b in self.objects["resourcequotas"].values()]
            rules = [unpack(b) for b in self.objects["devicetaintrules"].values()]
            priorities = [unpack(b) for b in self.objects["priorityclasses"].values()]
        # Handed to the new index: what it derived from slices whose bytes are unchanged is
        # taken as is (one set of devices in memory, not two); the rest goes as it is built.
        previous, self._live = self._live, None
        # A million long-lived index objects would make every collection that meets them walk
        # them while holding the interpreter (the event loop): tens of ms in a young collection
        # mid-build, 200 ms in a full one. So none runs while they are built, and they are then
        # exempted. Indexes hold no reference cycles: what they drop is freed by reference
        # counting, frozen or not.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._live = self.make_index(slices, classes, claims, nodes,
                                         resources, quotas, rules, cordoned, unready, priorities, leaving,
                                         previous=previous)
            gc.freeze()
        except Exception:
            # Handed over or not, the previous one is what the next full build takes from.
            self._live, self._full = previous, True
            raise
        finally:
            if collecting:
                gc.enable()
        self.full_builds += 1
        _return_free_memory()
        return self._live.index

    def _apply_changes(self, changed: dict[str, dict[str, bytes | None]]):
        """The events since the last build, one by one; None when one needs a full build."""
        index = self._live.index
        for key, raw in changed["resourceslices"].items():
            index = self._live.slice_changed(key.split("/", 1)[1], raw)
            if index is None:
                return None
        for key, raw in changed["resourceclaims"].items():
            index = self._live.claim_changed(key, raw)
            if index is None:
                return None
        return index

    def _rebuild_loop(self) -> None:
        while not self._stop.is_set():
            self._changed.wait(1.0)
            if self._stop.is_set():
                return
            if not all(self.synced.values()) or (self._built is not None and self._built[0] == self._version):
                self._changed.clear()
                continue
            self._changed.clear()
            try:
                with self._build_lock:
                    self._build()
            except Exception:  # noqa: BLE001 - keep the last index; the next change tries again
                log.exception("inventory index rebuild failed; keeping the previous index")
            self._stop.wait(self.rebuild_interval_s)

    # -- list and watch -----------------------------------------------------------------
    def _path(self, resource: str) -> str:
        return PATHS.get(resource, f"/apis/resource.k8s.io/v1/{resource}")

    @staticmethod
    def _kept(resource: str, obj: dict) -> bytes:
        if resource == "nodes":  # a Node's status is large: what selectors and the path choice read
            view = view_of(obj)
            obj = {"metadata": {"name": view.name, "labels": view.labels},
                   "allocatable": extended_allocatable(obj),
                   "unschedulable": bool((obj.get("spec") or {}).get("unschedulable")), "notReady": not_ready(obj),
                   "leaving": leaving_dra(obj)}
        elif resource == "priorityclasses":  # what preemption is decided by
            obj = {"metadata": {"name": view_of(obj).name}, "value": obj.get("value"),
                   "preemptionPolicy": obj.get("preemptionPolicy"), "globalDefault": obj.get("globalDefault")}
        elif resource == "devicetaintrules":  # the rule, not its eviction status
            obj = {"spec": obj.get("spec") or {}}
        elif resource == "resourcequotas":  # its device limits, not its `used`
            found = device_quota(obj)
            view = view_of(obj)
            obj = {"metadata": {"namespace": view.namespace, "name": view.name},
                   "spec": {"hard": found[2] if found else {}}}
        return pack(obj)


    def list_once(self, resource: str) -> str:
        """The whole collection, in pages: only one page is ever decoded at a time (one list of
        100,000 devices decoded at once was most of the webhook's peak memory)."""
        items: dict[str, bytes] = {}
        version = ""
        for page, page_version in pages(self.api, self._path(resource), page_size=self.page_size, timeout=10):
            for i in page:
                items[view_of(i).namespace + "/" + i["metadata"]["name"]] = self._kept(resource, i)
            version = page_version or version
            del page  # not held while the next page is read
        self.failing_since[resource] = None
        with self._lock:
            self.objects[resource] = items
            self.synced[resource] = True
            self._version += 1
            self._full = True
        self._changed.set()
        return version

    def _absent(self, resource: str) -> None:
        """The API does not serve this kind (an older cluster): none exist, and that is synced."""
        with self._lock:
            if self.objects[resource] or not self.synced[resource]:
                self.objects[resource] = {}
                self._version += 1
                self._full = True
            self.synced[resource] = True
        self.failing_since[resource] = None
        self._changed.set()

    def watch_once(self, resource: str, version: str) -> str:
        """Apply watch events until the server ends the stream; returns the last resourceVersion."""
        query = [("watch", "true"), ("resourceVersion", version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self.watch_timeout_s))]
        # The raw urllib3 response: JSON is decoded here, not into generated model objects.
        response = raw_get(self.api, self._path(resource), query, (5, self.watch_timeout_s + 10))
        self.failing_since[resource] = None  # the API answered: not stale
        for event in watch_events(response):
            version = self._apply(resource, event, version)
        return version

    def _apply(self, resource: str, event: dict, version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise ApiException(status=obj.get("code") or 500, reason=obj.get("message"))
        view = view_of(obj)
        if kind != "BOOKMARK":
            key = view.namespace + "/" + view.name
            kept = None if kind == "DELETED" else self._kept(resource, obj)
            with self._lock:
                if kept is not None and self.objects[resource].get(key) == kept:
                    return view.resource_version or version  # nothing we keep changed
                if kept is None:
                    self.objects[resource].pop(key, None)
                else:
                    self.objects[resource][key] = kept
                self._version += 1
                if resource in INCREMENTAL:
                    self._dirty[resource].add(key)
                else:
                    self._full = True  # classes and node labels: rare, and read by every view
            self._changed.set()
        return view.resource_version or version

    def _run(self, resource: str) -> None:
        version = ""
        backoff, failures = Backoff(self.backoff_s), Throttled(log)
        while not self._stop.is_set():
            try:
                if not version:
                    version = self.list_once(resource)
                    failures.recovered("%s list/watch works again", resource)
                    backoff.reset()
                version = self.watch_once(resource, version)
                failures.recovered("%s list/watch works again", resource)
                backoff.reset()
            except _Gone:
                log.info("%s watch expired (410 Gone): relisting", resource)
                self.relists += 1
                version = ""
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if isinstance(exc, ApiException) and exc.status == 404 and resource in OPTIONAL:
                    self._absent(resource)
                    version = ""
                    self._stop.wait(self.absent_retry_s)
                    continue
                if self.failing_since[resource] is None:
                    self.failing_since[resource] = time.monotonic()
                wait = backoff.next()
                failures.failed("%s list/watch failed (%s); retrying in up to %.0fs", resource,
                                why_failed(exc), backoff.max_s)
                self._stop.wait(wait)

    def start(self) -> "LiveInventory":
        for resource in RESOURCES:
            thread = threading.Thread(target=self._run, args=(resource,), daemon=True, name=f"watch-{resource}")
            thread.start()
            self._threads.append(thread)
        builder = threading.Thread(target=self._rebuild_loop, daemon=True, name="inventory-index")
        builder.start()
        self._threads.append(builder)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()

    def wait_synced(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self.synced.values()):
                return True
            time.sleep(0.05)
        return False
