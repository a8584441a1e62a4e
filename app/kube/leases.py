"""One coordination.k8s.io Lease read and written as it is: the caller decides who may hold it
(app.application.rollout.lease); writes are compare-and-swap on its resourceVersion."""

from __future__ import annotations

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError, view_of

from .client import api_message, raw_get, raw_send

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class LeaseStore:
    """Reads and writes one coordination.k8s.io Lease (the rollout's lock): compare-and-swap on
    its resourceVersion, so two commands never both take it."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str):
        self.api, self.path = api, LEASES.format(namespace=namespace)
        self.name, self.namespace = name, namespace

    def read(self) -> dict | None:
        try:
            return orjson.loads(raw_get(self.api, f"{self.path}/{self.name}").data)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise BridgeError(f"Lease {self.namespace}/{self.name}: {api_message(exc)}") from exc

    def write(self, current: dict | None, spec: dict) -> bool:
        """Create it, or replace `current` with this spec; False when someone wrote it first."""
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        try:
            if current is None:
                raw_send(self.api, "POST", self.path, body)
            else:
                body["metadata"]["resourceVersion"] = view_of(current).resource_version or None
                raw_send(self.api, "PUT", f"{self.path}/{self.name}", body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise BridgeError(f"Lease {self.namespace}/{self.name}: {api_message(exc)}") from exc
        return True
