"""Generated ResourceClaimTemplates no pod references are deleted after a grace period. IO.

- One replica at a time collects: the holder of a coordination.k8s.io Lease.
- A template is deleted once no pod has referenced it for `grace_s` (and it is that old), then
  pods are listed again after `settle_s`: one admitted meanwhile gets the template back.
- Every replica lists and watches our templates: its ensure-cache holds what exists (no timer),
  and forgets a deleted one, so the next pod pointed at it re-creates it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import Backoff, metadata_of, Throttled, vocabulary, view_of

from .client import each_item, list_pages, raw_get, watch_events, why_failed

log = logging.getLogger("dra_bridge.template_gc")
MANAGED = f"{vocabulary.MANAGED_BY_LABEL}={vocabulary.OURS}"
TEMPLATES = "/apis/resource.k8s.io/v1/resourceclaimtemplates"
PODS = "/api/v1/pods"


def referenced(pods) -> set[tuple[str, str]]:
    """(namespace, template) of every template a pod's spec.resourceClaims names."""
    out = set()
    for pod in pods:
        ns = view_of(pod).namespace
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = (ref or {}).get("resourceClaimTemplateName")
            if name:
                out.add((ns, name))
    return out


def _created(template: dict) -> float:
    text = metadata_of(template).get("creationTimestamp")
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()  # unknown age: treated as new


def collectable(templates: list[dict], in_use: set, unused_since: dict, now: float,
                grace_s: float) -> tuple[list[tuple[str, str]], dict]:
    """Pure: the templates to delete now, and the updated first-seen-unused times. A template
    goes once it is older than grace_s and no pod has named it for grace_s."""
    seen: dict = {}
    delete = []
    for t in templates:
        key = view_of(t).key()
        if key in in_use:
            continue
        since = unused_since.get(key, now)
        seen[key] = since
        if now - since >= grace_s and now - _created(t) >= grace_s:
            delete.append(key)
    return sorted(delete), seen


def _micro(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Lease:
    """A coordination.k8s.io/v1 Lease held by one identity at a time; a lapsed one is taken over.
    Updates carry the resourceVersion read, so two replicas never both win a round."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str, duration_s: int = 60,
                 clock=time.time):
        self.coordination = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity, self.duration_s, self.clock = namespace, name, identity, duration_s, clock

    def acquire(self) -> bool:
        now = self.clock()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s, "renewTime": _micro(now)}
        try:
            current = self.coordination.api_client.sanitize_for_serialization(
                self.coordination.read_namespaced_lease(self.name, self.namespace, _request_timeout=5))
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": _micro(now)}}
            try:
                self.coordination.create_namespaced_lease(self.namespace, body, _request_timeout=5)
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False  # another replica created it first
                raise
        held = current.get("spec") or {}
        holder = held.get("holderIdentity")
        renewed = held.get("renewTime")
        lapsed = True
        if renewed:
            age = now - dt.datetime.fromisoformat(renewed.replace("Z", "+00:00")).timestamp()
            lapsed = age > (held.get("leaseDurationSeconds") or self.duration_s)
        if holder not in (None, "", self.identity) and not lapsed:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _micro(now)
            spec["leaseTransitions"] = (held.get("leaseTransitions") or 0) + 1
        current["spec"] = {**held, **spec}
        try:
            self.coordination.replace_namespaced_lease(self.name, self.namespace, current, _request_timeout=5)
        except ApiException as exc:
            if exc.status == 409:
                return False  # someone renewed or took it between our read and write
            raise
        return True


class TemplateCollector:
    """Deletes unreferenced generated templates while this replica holds the lease."""

    def __init__(self, api: client.ApiClient, lease: Lease, grace_s: float = 3600.0, interval_s: float = 300.0,
                 settle_s: float = 5.0, page_size: int = 500, clock=time.time, sleep=time.sleep,
                 on_collected: Callable[[int], None] | None = None, on_leader: Callable[[bool], None] | None = None):
        self.api, self.lease = api, lease
        self.resource = client.ResourceV1Api(api)
        self.grace_s, self.interval_s, self.settle_s, self.page_size = grace_s, interval_s, settle_s, page_size
        self.clock, self.sleep = clock, sleep
        self.on_collected, self.on_leader = on_collected, on_leader
        self.unused_since: dict = {}
        self.deleted = self.restored = 0
        self._stop = threading.Event()

    def _list(self, path: str, selector: str | None = None) -> list[dict]:
        return list_pages(self.api, path, selector, self.page_size)[0]

    def run_once(self) -> list[tuple[str, str]]:
        """One round: the templates deleted (none when another replica holds the lease)."""
        leader = self.lease.acquire()
        if self.on_leader:
            self.on_leader(leader)
        if not leader:
            self.unused_since.clear()  # the next holder starts its own count
            return []
        templates = self._list(TEMPLATES, MANAGED)
        in_use = referenced(each_item(self.api, PODS, None, self.page_size))
        delete, self.unused_since = collectable(templates, in_use, self.unused_since, self.clock(), self.grace_s)
        if not delete:
            return []
        bodies = {((t["metadata"].get("namespace", "")), t["metadata"]["name"]): t for t in templates}
        gone = []
        for ns, name in delete:
            try:
                self.resource.delete_namespaced_resource_claim_template(name, ns, _request_timeout=10)
                gone.append((ns, name))
            except ApiException as exc:
                if exc.status != 404:
                    log.warning("template %s/%s not deleted: API answered %s", ns, name, exc.status)
        # A pod admitted while we decided (its webhook's cache still said "exists") gets it back.
        self.sleep(self.settle_s)
        now_in_use = referenced(each_item(self.api, PODS, None, self.page_size))
        for key in gone:
            self.unused_since.pop(key, None)
            if key in now_in_use:
                self._restore(bodies[key])
        self.deleted += len(gone)
        if gone:
            log.info("deleted %d unreferenced ResourceClaimTemplate(s): %s", len(gone),
                     ", ".join(f"{ns}/{n}" for ns, n in gone[:10]))
        if self.on_collected:
            self.on_collected(len(gone))
        return gone

    def _restore(self, template: dict) -> None:
        meta = template["metadata"]
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "labels": meta.get("labels")},
                "spec": template["spec"]}
        try:
            self.resource.create_namespaced_resource_claim_template(meta.get("namespace"), body, _request_timeout=10)
            self.restored += 1
            log.warning("template %s/%s was deleted as a pod came to use it: created again",
                        meta.get("namespace"), meta["name"])
        except ApiException as exc:
            if exc.status != 409:
                log.error("template %s/%s could not be created again: API answered %s",
                          meta.get("namespace"), meta["name"], exc.status)

    def _loop(self) -> None:
        failures = Throttled(log)
        while not self._stop.is_set():
            try:
                self.run_once()
                failures.recovered("template collection works again")
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                failures.failed("template collection round failed (%s); next round in %.0fs", type(exc).__name__,
                                self.interval_s)
            self._stop.wait(self.interval_s)

    def start(self) -> "TemplateCollector":
        threading.Thread(target=self._loop, daemon=True, name="template-gc").start()
        return self

    def stop(self) -> None:
        self._stop.set()


class TemplateWatch:
    """Keeps the ensure-cache true: lists our templates, then watches them, telling the store
    what exists (`resync(objects)`, `observe(obj)`) and what was deleted by anyone
    (`forget((ns, name))`). A broken watch lists again, so deletes it missed are forgotten."""

    def __init__(self, api: client.ApiClient, store, timeout_s: int = 300, backoff_s: float = 1.0,
                 on_forgot: Callable[[], None] | None = None, page_size: int = 500):
        self.api, self.store, self.timeout_s, self.on_forgot = api, store, timeout_s, on_forgot
        self.backoff = Backoff(backoff_s)
        self.page_size = page_size
        self.forgotten = 0
        self.synced = threading.Event()  # the first list has reached the store
        self._stop = threading.Event()

    def list_once(self) -> str:
        items, version = list_pages(self.api, TEMPLATES, MANAGED, self.page_size)
        self.store.resync(items)
        self.synced.set()
        return version

    def watch_once(self, version: str) -> str:
        query = [("watch", "true"), ("labelSelector", MANAGED), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self.timeout_s)), ("resourceVersion", version)]
        events = watch_events(raw_get(self.api, TEMPLATES, query, (5, self.timeout_s + 10)))
        for event in events:
            version = self._apply(event, version)
            if self._stop.is_set() or not version:
                events.close()
                break
        return version

    def _apply(self, event: dict, version: str) -> str:
        obj = event.get("object") or {}
        kind = event.get("type")
        if kind == "ERROR":
            return ""  # expired: list again
        view = view_of(obj)
        if kind == "DELETED":
            self.store.forget(view.key())
            self.forgotten += 1
            if self.on_forgot:
                self.on_forgot()
        elif kind in ("ADDED", "MODIFIED"):
            self.store.observe(obj)
        return view.resource_version or version

    def _loop(self) -> None:
        version = ""
        failures = Throttled(log)
        while not self._stop.is_set():
            try:
                if not version:
                    version = self.list_once()
                    failures.recovered("template watch works again")  # said once listing works, not when a watch ends
                version = self.watch_once(version)
                self.backoff.reset()
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                failures.failed("template watch failed (%s); listing again in up to %.0fs", why_failed(exc),
                                self.backoff.max_s)
                version = ""
                self._stop.wait(self.backoff.next())

    def start(self) -> "TemplateWatch":
        threading.Thread(target=self._loop, daemon=True, name="template-watch").start()
        return self

    def stop(self) -> None:
        self._stop.set()
