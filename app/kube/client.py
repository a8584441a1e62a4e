"""Kubernetes API clients (kubeconfig, in-cluster, plain host) and raw reads that skip model objects."""

from __future__ import annotations

import concurrent.futures

import os

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError


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


def watch_events(response):
    """Decoded events of a watch stream as they arrive (each as soon as its line is complete);
    the connection is released when the stream ends or the caller stops iterating."""
    buffer = b""
    try:
        while True:
            chunk = response.read1(65536)  # what has arrived: events must not wait for a full buffer
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield orjson.loads(line)
    finally:
        response.release_conn()


def list_items(api: client.ApiClient, path: str, timeout=30) -> list[dict]:
    """Every item of one collection (one GET, no paging); BridgeError naming it on an API error."""
    try:
        response = raw_get(api, path, timeout=timeout)
    except ApiException as exc:
        raise BridgeError(f"list {path.rsplit('/', 1)[-1]}: API answered {exc.status}") from None
    return orjson.loads(response.data).get("items") or []


_CALLS = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="api-call")


def within(timeout_s: float, call, *args, **kwargs):
    """Run one API call with `timeout_s` for the whole of it: a socket timeout bounds each read,
    not a server that trickles its answer a byte at a time. TimeoutError when it runs over (the
    abandoned call finishes in its own thread, bounded by the pool)."""
    future = _CALLS.submit(call, *args, **kwargs)
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no complete answer within {timeout_s:g} s") from None


def api_message(exc: ApiException) -> str:
    """`API answered 422: <the API server's own message>` (its Status says why: an admission
    policy's denial, a validation error), clipped for logs and warnings."""
    message = ""
    try:
        body = orjson.loads(exc.body) if exc.body else {}
        message = body.get("message", "") if isinstance(body, dict) else ""
    except (orjson.JSONDecodeError, TypeError):
        pass
    text = f"API answered {exc.status}" + (f": {message}" if message else f" {exc.reason or ''}".rstrip())
    return text if len(text) <= 400 else text[:397] + "..."
