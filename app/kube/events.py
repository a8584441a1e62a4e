"""Events on the policy's ConfigMap: a policy a replica rejected (or took again) is seen with
`kubectl describe configmap` and `kubectl get events`, not only in its log."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import orjson
from kubernetes.client import ApiClient

from app.common import vocabulary

from .client import api_message, raw_get, raw_send

log = logging.getLogger("dra_bridge.events")


class EventSink:
    """Posts core/v1 Events about one object, off the caller's thread (the event loop's tick)."""

    def __init__(self, api: ApiClient | None, namespace: str, name: str, kind: str = "ConfigMap",
                 instance: str = "dra-bridge", timeout_s: float = 5.0):
        self.api, self.namespace, self.name, self.kind = api, namespace, name, kind
        self.instance, self.timeout_s = instance, timeout_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="events")
        self.posted = 0

    def post(self, event_type: str, reason: str, message: str) -> None:
        if self.api is None:
            return
        self._pool.submit(self._send, event_type, reason, message)

    def _uid(self) -> str | None:
        """The object's uid now (it may have been recreated); None where it cannot be read."""
        path = f"/api/v1/namespaces/{self.namespace}/{self.kind.lower()}s/{self.name}"
        try:
            return orjson.loads(raw_get(self.api, path, timeout=self.timeout_s).data)["metadata"].get("uid")
        except Exception as exc:  # noqa: BLE001 - posted without it: `kubectl get events` still shows it
            log.info("event on %s %s/%s posted without its uid: %s", self.kind, self.namespace, self.name,
                     api_message(exc) if hasattr(exc, "status") else f"{type(exc).__name__}: {exc}")
            return None

    def _send(self, event_type: str, reason: str, message: str) -> None:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
                "involvedObject": {"apiVersion": "v1", "kind": self.kind, "namespace": self.namespace,
                                   "name": self.name},
                "type": event_type, "reason": reason, "message": message[:1024],
                "source": {"component": "dra-bridge", "host": self.instance},
                "reportingComponent": vocabulary.EVENT_COMPONENT, "reportingInstance": self.instance[:128],
                "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        started = time.monotonic()
        uid = self._uid()
        if uid:  # kubectl describe finds an object's Events by its uid too
            body["involvedObject"]["uid"] = uid
        try:
            raw_send(self.api, "POST", f"/api/v1/namespaces/{self.namespace}/events", body, timeout=self.timeout_s)
            self.posted += 1
        except Exception as exc:  # noqa: BLE001 - the log line and metric already say it; the Event is extra
            why = api_message(exc) if hasattr(exc, "status") else f"{type(exc).__name__}: {exc}"
            log.warning("event %s on %s %s/%s not posted after %.1f s: %s", reason, self.kind, self.namespace,
                        self.name, time.monotonic() - started, why)
