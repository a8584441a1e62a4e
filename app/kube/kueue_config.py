"""Kueue's configuration as the cluster holds it: its ConfigMap (kueue-manager-config) and its
manager Deployment (its --feature-gates). IO; what they mean is migration.kueue's."""

from __future__ import annotations

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError
from app.common.vocabulary import KUEUE_CONFIG, KUEUE_DEPLOYMENT

from .client import raw_get, why_failed


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
        raise BridgeError(f"read Kueue's configuration in namespace {namespace}: {why_failed(exc)}") from None
