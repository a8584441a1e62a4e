"""Publish our node's ResourceSlices: create, update, delete our own only. IO."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError, view_of
from app.common import release as releases
from app.kube import api_message

from . import render
from .gpuinfo import NodeGpus

log = logging.getLogger("dra_bridge.publish")


class PublishError(BridgeError):
    pass


@dataclass
class PublishResult:
    generation: int
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: bool = False
    devices: int = 0  # devices in the pool as rendered this round
    dropped: list = field(default_factory=list)  # release.Lost: what the server dropped (then written again)


class SlicePublisher:
    def __init__(self, api: client.ApiClient, node_name: str, driver: str, style: dict | None = None,
                 timeout_s: float = 10.0, attempts: int = 5, backoff_s: float = 0.5,
                 sleep=time.sleep):
        self.resource = client.ResourceV1Api(api)
        self.core = client.CoreV1Api(api)
        # style: render.slices keywords (qualify, shareable, partitionable, shadow_of, release)
        self.node_name, self.driver, self.style = node_name, driver, dict(style or {})
        self.release = self.style.get("release") or releases.default_release()
        self.timeout_s, self.attempts, self.backoff_s, self.sleep = timeout_s, attempts, backoff_s, sleep
        self._node_uid: str | None = None

    def _retry(self, what: str, fn, *args, **kwargs):
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                return fn(*args, _request_timeout=self.timeout_s, **kwargs)
            except ApiException as exc:
                # 409 needs a fresh read: the next publish round re-lists.
                retriable = exc.status == 429 or exc.status >= 500
                if not retriable or attempt == self.attempts:
                    raise PublishError(f"{what}: {api_message(exc)}") from exc
                reason = exc.status
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt == self.attempts:
                    raise PublishError(f"{what}: API unreachable ({type(exc).__name__})") from exc
                reason = type(exc).__name__
            log.warning("%s failed (%s), retry %d/%d in %.1fs", what, reason, attempt, self.attempts - 1, delay)
            self.sleep(delay)
            delay = min(delay * 2, 30.0)

    def node_uid(self) -> str | None:
        if self._node_uid is None:
            node = self._retry(f"get node {self.node_name}", self.core.read_node, self.node_name)
            self._node_uid = node.metadata.uid
        return self._node_uid

    def _ours(self) -> list[dict]:
        listed = self._retry("list resourceslices", self.resource.list_resource_slice,
                             field_selector=f"spec.nodeName={self.node_name},spec.driver={self.driver}",
                             label_selector=f"{render.MANAGED_LABEL}=dra-bridge", _preload_content=False)
        items = orjson.loads(listed.data).get("items") or []
        # Field selectors may be ignored by a proxy or old server: check again ourselves.
        return [s for s in items if (s.get("spec") or {}).get("driver") == self.driver
                and (s.get("spec") or {}).get("nodeName") == self.node_name
                and view_of(s).labels.get(render.MANAGED_LABEL) == "dra-bridge"]

    def foreign(self) -> list[str]:
        """Names of slices another writer (NVIDIA's kubelet plugin) publishes for this node and
        driver: publishing beside them would fight it for the pool."""
        listed = self._retry("list resourceslices", self.resource.list_resource_slice,
                             field_selector=f"spec.nodeName={self.node_name},spec.driver={self.driver}",
                             _preload_content=False)
        items = orjson.loads(listed.data).get("items") or []
        return sorted(s["metadata"]["name"] for s in items
                      if (s.get("spec") or {}).get("driver") == self.driver
                      and (s.get("spec") or {}).get("nodeName") == self.node_name
                      and view_of(s).labels.get(render.MANAGED_LABEL) != "dra-bridge")

    def publish(self, node: NodeGpus) -> PublishResult:
        """One round. Every write is compared with what the server stored: a field it dropped
        means that gate is off there (whatever its release says), so the pool is rendered again
        without what needs it (an unhealthy GPU left out, counters gone) and written at once."""
        result = self._publish(node)
        if not result.dropped:
            return result
        gates = releases.gates_from_losses(result.dropped)
        log.error("the API server dropped %s from our slices: %s off there; publishing again without them",
                  ", ".join(sorted({str(lost) for lost in result.dropped})[:5]), ", ".join(gates))
        self.release = self.release.with_gates({g: False for g in gates}, "writes showed " + ", ".join(gates) + " off")
        again = self._publish(node)
        if again.dropped:
            raise PublishError(f"the API server still drops {', '.join(map(str, again.dropped[:3]))}")
        again.dropped = result.dropped
        return again

    def _publish(self, node: NodeGpus) -> PublishResult:
        existing = {s["metadata"]["name"]: s for s in self._ours()}
        generation = max([(s["spec"].get("pool") or {}).get("generation", 0) for s in existing.values()] or [0])
        # Rendered once: names and the content label do not depend on the generation.
        style = {**self.style, "release": self.release}
        wanted = render.slices(node, self.node_name, self.driver, generation + 1, self.node_uid(), **style)
        wanted_hash = wanted[0]["metadata"]["labels"][render.CONTENT_LABEL]
        current_hashes = {(s["metadata"].get("labels") or {}).get(render.CONTENT_LABEL) for s in existing.values()}
        devices = sum(len(s["spec"].get("devices") or []) for s in wanted)
        if existing and current_hashes == {wanted_hash} and set(existing) == {s["metadata"]["name"] for s in wanted}:
            return PublishResult(generation, unchanged=True, devices=devices)
        generation += 1
        result = PublishResult(generation, devices=devices)
        for obj in wanted:
            name = obj["metadata"]["name"]
            if name in existing:
                obj["metadata"]["resourceVersion"] = existing[name]["metadata"].get("resourceVersion")
                stored = self._retry(f"update resourceslice {name}", self.resource.replace_resource_slice, name, obj,
                                     _preload_content=False)
                result.updated += 1
            else:
                stored = self._retry(f"create resourceslice {name}", self.resource.create_resource_slice, obj,
                                     _preload_content=False)
                result.created += 1
            answer = _decoded(stored)
            if answer is not None:  # an answer we cannot read proves nothing either way
                result.dropped += releases.dropped(obj, answer, "ResourceSlice")
        for name in set(existing) - {o["metadata"]["name"] for o in wanted}:
            self._delete(name)
            result.deleted += 1
        return result

    def _delete(self, name: str) -> None:
        try:
            self._retry(f"delete resourceslice {name}", self.resource.delete_resource_slice, name)
        except PublishError as exc:
            if "404" not in str(exc):
                raise

    def remove_all(self) -> int:
        names = [s["metadata"]["name"] for s in self._ours()]
        for name in names:
            self._delete(name)
        return len(names)


def _decoded(response) -> dict | None:
    """The object the server stored, as it answered (raw JSON: a client model would drop fields
    it does not know); None when there is no such answer."""
    try:
        answer = orjson.loads(response.data)
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return None
    return answer if isinstance(answer, dict) and answer.get("kind") == "ResourceSlice" else None
