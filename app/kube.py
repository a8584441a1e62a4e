"""Kubernetes API adapter: the only module that talks to the API server."""

from __future__ import annotations

import logging
import os
import threading
import time

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from app.errors import BridgeError, TemplateEnsureError

log = logging.getLogger("dra_bridge.kube")


def api_client(kubeconfig: str | None = None, timeout_retries: bool = False) -> client.ApiClient | None:
    """An ApiClient from a kubeconfig, the in-cluster service account, or None when neither exists."""
    configuration = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        elif os.path.exists(os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)):
            config.load_kube_config(client_configuration=configuration)
        else:
            return None
    except (config.ConfigException, OSError, ValueError) as exc:
        raise BridgeError(f"kubeconfig: {exc}") from None
    # Retrying inside an admission call would blow the webhook timeout; callers decide.
    configuration.retries = urllib3.Retry(total=0, connect=0, read=0) if not timeout_retries else None
    return client.ApiClient(configuration)


def api_client_for_host(host: str) -> client.ApiClient:
    """Plain-HTTP client for a given API URL (tests, local proxies such as `kubectl proxy`)."""
    configuration = client.Configuration(host=host)
    configuration.retries = urllib3.Retry(total=0, connect=0, read=0)
    return client.ApiClient(configuration)


def raw_get(api: client.ApiClient, path: str, query: list | None = None, timeout=10):
    """GET as raw urllib3 response (JSON decoded by the caller, or streamed for watches), not
    generated model objects; ApiException on an error status."""
    method, url, headers, body, _post = api.param_serialize(
        "GET", path, query_params=query or [], header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"])
    response = api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
    if response.status >= 400:
        raise ApiException(status=response.status, reason=response.read()[:200].decode(errors="replace"))
    return response.response


class _TTLSet:
    def __init__(self, ttl_s: float, max_entries: int = 50_000):
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._items: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def __contains__(self, key: tuple) -> bool:
        expires = self._items.get(key)
        return expires is not None and expires > time.monotonic()

    def add(self, key: tuple) -> None:
        with self._lock:
            if len(self._items) >= self.max_entries:
                self._items.clear()  # rare; a miss only costs one idempotent create
            self._items[key] = time.monotonic() + self.ttl_s

    def discard(self, key: tuple) -> None:
        with self._lock:
            self._items.pop(key, None)


class TemplateStore:
    """Creates ResourceClaimTemplates on demand; remembers what exists so hits make no call."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 600.0):
        self.api = client.ResourceV1Api(api) if api is not None else None
        self.timeout_s = timeout_s
        self.known = _TTLSet(ttl_s)
        self.offline: dict[tuple, dict] = {}

    @property
    def is_offline(self) -> bool:
        return self.api is None

    def cached(self, template: dict) -> bool:
        meta = template["metadata"]
        return (meta.get("namespace", ""), meta["name"]) in self.known

    def ensure(self, template: dict) -> None:
        """Make sure the template exists; TemplateEnsureError when the API does not confirm it."""
        meta = template["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.known:
            return
        if self.api is None:
            # No cluster configured (local demo): keep it in memory so `plan`-like output is possible.
            self.offline[key] = template
            self.known.add(key)
            return
        try:
            self.api.create_namespaced_resource_claim_template(
                key[0], template, _request_timeout=self.timeout_s)
        except ApiException as exc:
            if exc.status != 409:
                raise TemplateEnsureError(f"API answered {exc.status} {exc.reason or ''}".strip()) from None
            # AlreadyExists: another replica or an earlier pod created it. Same name, same spec.
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemplateEnsureError(f"API unreachable or too slow: {type(exc).__name__}") from None
        self.known.add(key)


class NamespaceLabels:
    """Namespace labels for policy selectors, cached briefly; {} when there is no cluster."""

    def __init__(self, api: client.ApiClient | None, timeout_s: float = 2.0, ttl_s: float = 60.0):
        self.api = client.CoreV1Api(api) if api is not None else None
        self.timeout_s, self.ttl_s = timeout_s, ttl_s
        self._cache: dict[str, tuple[float, dict]] = {}

    def get(self, namespace: str) -> dict[str, str]:
        if self.api is None or not namespace:
            return {}
        hit = self._cache.get(namespace)
        if hit and hit[0] > time.monotonic():
            return hit[1]
        try:
            ns = self.api.read_namespace(namespace, _request_timeout=self.timeout_s)
            labels = dict(ns.metadata.labels or {})
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("cannot read labels of namespace %s: %s", namespace, type(exc).__name__)
            labels = hit[1] if hit else {}
        self._cache[namespace] = (time.monotonic() + self.ttl_s, labels)
        return labels
