"""The API calls of `dra-bridge rollout`: what a plan reads, and the writes that move a node
(node patches, evictions). Pods leave only through the Eviction API: nothing is deleted or forced.
Every write can be a server-side dry run."""

from __future__ import annotations

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError, WriteConflict

from .client import api_message, list_pages, raw_get, raw_send

PATHS = {"nodes": "/api/v1/nodes", "pods": "/api/v1/pods", "namespaces": "/api/v1/namespaces",
         "resourcequotas": "/api/v1/resourcequotas",
         "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
         "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
         "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
         "deviceclasses": "/apis/resource.k8s.io/v1/deviceclasses",
         "jobs": "/apis/batch/v1/jobs", "deployments": "/apis/apps/v1/deployments",
         "statefulsets": "/apis/apps/v1/statefulsets", "daemonsets": "/apis/apps/v1/daemonsets",
         "persistentvolumeclaims": "/api/v1/persistentvolumeclaims", "persistentvolumes": "/api/v1/persistentvolumes",
         "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses"}


def snapshot(api: client.ApiClient, kinds=tuple(PATHS), fields: str | None = None) -> dict[str, list[dict]]:
    """What the plan reads, one list per kind (DRA kinds a cluster does not serve: none);
    `fields`: a field selector for every list."""
    out = {}
    for kind in kinds:
        path = PATHS[kind]
        try:
            out[kind] = list_pages(api, path, fields=fields)[0]
        except ApiException as exc:
            if exc.status == 404 and path.startswith("/apis/resource.k8s.io"):
                out[kind] = []
                continue
            raise BridgeError(f"list {kind}: {api_message(exc)}") from exc
    return out


class NodeWrites:
    """Reads and writes about one node at a time; with dry_run every write is a server-side dry run."""

    def __init__(self, api: client.ApiClient, dry_run: bool = False):
        self.api, self.dry_run = api, dry_run
        self.query = [("dryRun", "All")] if dry_run else []

    def node(self, name: str) -> dict:
        try:
            return orjson.loads(raw_get(self.api, f"/api/v1/nodes/{name}").data)
        except ApiException as exc:
            raise BridgeError(f"node {name}: {api_message(exc)}") from exc

    def on_node(self, name: str, *kinds: str) -> dict[str, list[dict]]:
        """These kinds (pods, resourceslices) on one node only."""
        return snapshot(self.api, kinds, fields=f"spec.nodeName={name}")

    def judged_on_node(self, name: str) -> dict[str, list[dict]]:
        """A snapshot for one node: its pods and slices, with what judging their paths needs."""
        return {**snapshot(self.api, ("namespaces", "resourcequotas", "deviceclasses", "resourceclaims", "jobs",
                                      "priorityclasses")),
                **self.on_node(name, "pods", "resourceslices")}

    def pods(self) -> list[dict]:
        """Every pod (what a workload has bound)."""
        return snapshot(self.api, ("pods",))["pods"]

    def patch_node(self, name: str, patch: dict) -> None:
        """A merge patch; one that carries metadata.resourceVersion applies only to that version
        (WriteConflict otherwise)."""
        try:
            raw_send(self.api, "PATCH", f"/api/v1/nodes/{name}", patch, self.query,
                     content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status == 409:
                raise WriteConflict(f"node {name}: {api_message(exc)}") from exc
            raise BridgeError(f"node {name}: {api_message(exc)}") from exc

    def evict(self, namespace: str, name: str) -> str | None:
        """None once the API took the eviction (or the pod is gone); else why not (429: a budget)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if self.dry_run:
            body["deleteOptions"] = {"dryRun": ["All"]}
        try:
            raw_send(self.api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body, self.query)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 429:
                return api_message(exc)
            raise BridgeError(f"evict {namespace}/{name}: {api_message(exc)}") from exc
        return None
