"""Kueue as the cluster holds it: its configuration (ConfigMap kueue-manager-config and the
manager Deployment's --feature-gates) and its queue objects (ClusterQueues, LocalQueues,
Workloads). IO; what they mean is migration.kueue's and migration.queue_budgets'."""

from __future__ import annotations

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError, view_of
from app.common.vocabulary import KUEUE_CONFIG, KUEUE_DEPLOYMENT

from .client import list_pages, raw_get, why_failed


def _get(api: client.ApiClient, path: str) -> dict | None:
    """The object, or None where it does not exist; ApiException for any other answer."""
    try:
        return orjson.loads(raw_get(api, path).data)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def read_kueue(api: client.ApiClient, namespace: str = KUEUE_CONFIG[0]) -> tuple[dict | None, dict | None]:
    """(ConfigMap, manager Deployment), each None where absent; BridgeError naming the namespace
    when the API does not answer or refuses (RBAC)."""
    try:
        configmap = _get(api, f"/api/v1/namespaces/{namespace}/configmaps/{KUEUE_CONFIG[1]}")
        if configmap is None:
            return None, None
        return configmap, _get(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/{KUEUE_DEPLOYMENT}")
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise BridgeError(f"read Kueue's configuration in namespace {namespace}: {why_failed(exc)}") from exc


KUEUE_KINDS = {"clusterqueues": "ClusterQueue", "localqueues": "LocalQueue", "workloads": "Workload"}
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # v1beta2 from Kueue 0.15


def list_kueue(api: client.ApiClient, resource: str, namespace: str | None = None) -> list[dict]:
    """Kueue's objects of one resource (clusterqueues, localqueues, workloads), each with its
    apiVersion and kind; [] where Kueue does not serve it (not installed). BridgeError naming it
    when the API does not answer or refuses (RBAC)."""
    scope = f"/namespaces/{namespace}" if namespace and resource != "clusterqueues" else ""
    try:
        for version in KUEUE_VERSIONS:
            found = _get(api, f"/apis/kueue.x-k8s.io/{version}{scope}/{resource}")
            if found is not None:
                return [{"apiVersion": f"kueue.x-k8s.io/{version}", "kind": KUEUE_KINDS[resource], **item}
                        for item in found.get("items") or [] if isinstance(item, dict)]
        return []
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise BridgeError(f"list Kueue's {resource}: {why_failed(exc)}") from exc


def list_queues(api: client.ApiClient, namespace: str | None = None) -> list[dict]:
    """Kueue's ClusterQueues, and the LocalQueues and Workloads that tie pods to them (of one
    namespace, where given); [] where Kueue is not installed."""
    queues = list_kueue(api, "clusterqueues")
    if not queues:
        return []
    return queues + list_kueue(api, "localqueues", namespace) + list_kueue(api, "workloads", namespace)


def read_queues(api: client.ApiClient) -> list[dict]:
    """list_queues, and the unfinished pods of the namespaces whose LocalQueues feed them."""
    found = list_queues(api)
    namespaces = sorted({view_of(o).namespace for o in found if o["kind"] == "LocalQueue"})
    try:
        for namespace in namespaces:
            pods, _version = list_pages(api, f"/api/v1/namespaces/{namespace}/pods",
                                        fields="status.phase!=Succeeded,status.phase!=Failed")
            found += [{"apiVersion": "v1", "kind": "Pod", **pod} for pod in pods]
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise BridgeError(f"list the pods of Kueue's queues: {why_failed(exc)}") from exc
    return found
