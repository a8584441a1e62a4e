"""Reads the ResourceClaims and templates a pod names, for the admin rules' per-pod totals, the
PodGroup it joins (which claims the group shares), and the pod a scheduler's claim serves. Claims and templates are read as they are now,
every time: a name can be deleted and created again with other devices, so no read is reused.
A template this replica generated is answered from memory only while the API has none (a dry
run's rewrite, which is never written). PodGroups are kept a little while."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from urllib.parse import quote

import orjson
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from app.common import view_of
from .client import raw_get, within

PLURALS = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
# PodGroups (GenericWorkload) by release: v1alpha2 (1.36), v1alpha3 and v1beta1 (1.37+).
POD_GROUP_VERSIONS = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1alpha2")


class ClaimReader:
    def __init__(self, api: ApiClient | None, timeout_s: float = 1.5, keep_s: float = 30.0, size: int = 2048):
        self.api, self.timeout_s, self.keep_s, self.size = api, timeout_s, keep_s, size
        self._kept: OrderedDict[tuple, tuple[float, dict | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._group_versions = POD_GROUP_VERSIONS  # narrowed to the one served once one answers

    def remember(self, namespace: str, obj: dict) -> None:
        """A template this replica generated: known before (or without) the API having it."""
        name = view_of(obj).name
        if name:
            self._keep((namespace, obj.get("kind", "ResourceClaimTemplate"), name), obj, float("inf"))

    def __call__(self, namespace: str, kind: str, name: str) -> dict | None:
        """The object, None when it does not exist; ApiException / TimeoutError when unknown."""
        key = (namespace, kind, name)
        now = time.monotonic()
        with self._lock:
            found = self._kept.get(key)
        if kind == "PodGroup" and found is not None and found[0] > now:
            return found[1]
        if kind == "Pod" and self.api is not None:  # the pod a scheduler's claim serves
            return self._pod(namespace, name)
        if self.api is None or (kind not in PLURALS and kind != "PodGroup"):
            return found[1] if found is not None and kind in PLURALS else None
        if kind == "PodGroup":
            obj = self._pod_group(namespace, name)
            if obj is not None:
                self._keep(key, obj, now + self.keep_s)
            return obj
        try:
            return self._get(f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace)}/{PLURALS[kind]}/{quote(name)}")
        except ApiException as exc:
            if exc.status != 404:
                raise
        return found[1] if found is not None else None  # ours, not written (yet)

    def _get(self, path: str) -> dict:
        return orjson.loads(within(self.timeout_s, lambda: raw_get(self.api, path, timeout=self.timeout_s).data))

    def _pod(self, namespace: str, name: str) -> dict | None:
        try:
            return self._get(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}")
        except ApiException as exc:
            if exc.status != 404:
                raise
        return None

    def _pod_group(self, namespace: str, name: str) -> dict | None:
        """The PodGroup from the first version served; None: not found, or no version served."""
        for version in self._group_versions:
            try:
                obj = self._get(f"/apis/{version}/namespaces/{quote(namespace)}/podgroups/{quote(name)}")
            except ApiException as exc:
                if exc.status != 404:
                    raise
                if _object_missing(exc):  # the version is served, the object is not there
                    self._group_versions = (version,)
                    return None
                continue
            self._group_versions = (version,)
            return obj
        return None

    def _keep(self, key: tuple, obj: dict | None, until: float) -> None:
        with self._lock:
            self._kept[key] = (until, obj)
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


def _object_missing(exc: ApiException) -> bool:
    """A 404 about the object (details name its kind), not about a version the server lacks."""
    try:
        details = orjson.loads(exc.body or b"{}").get("details") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return details.get("kind") == "podgroups"
