"""Kubernetes API clients (kubeconfig, in-cluster, plain host) and raw reads that skip model objects."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import warnings
from dataclasses import dataclass

import orjson
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from app.common import BridgeError, ClusterUnreachable

log = logging.getLogger("dra_bridge.kube")


@dataclass(frozen=True)
class ApiTarget:
    """Where API calls go, said in logs and errors: the server, and the kubeconfig and context
    that named it (or the in-cluster service account)."""
    server: str
    source: str  # "kubeconfig /path" | "in-cluster service account"
    context: str | None = None

    def __str__(self) -> str:
        context = f", context {self.context}" if self.context else ""
        return f"{self.server} ({self.source}{context})"


def kubeconfig_paths(kubeconfig: str | None, environ=os.environ, ambient: bool = True) -> str | None:
    """The kubeconfig to read, as kubectl chooses it: --kubeconfig (which must exist), else the
    files of $KUBECONFIG that exist (several, merged; `:`-separated), else ~/.kube/config when
    present; None when there is none (in-cluster or demo mode). `ambient` False: only --kubeconfig."""
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.isfile(path):
            raise BridgeError(f"--kubeconfig: {kubeconfig}: no such file")
        return path
    if not ambient:
        return None
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        present = [os.path.expanduser(p) for p in listed if os.path.isfile(os.path.expanduser(p))]
        return os.pathsep.join(present) if present else None
    default = os.path.expanduser("~/.kube/config")
    return default if os.path.isfile(default) else None


def connect(kubeconfig: str | None = None, context: str | None = None, timeout_retries: bool = False,
            environ=os.environ, ambient: bool = True,
            request_timeout: float | None = None) -> tuple[client.ApiClient, ApiTarget] | None:
    """(ApiClient, where it points) from --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster
    service account, in kubectl's order; None when there is none of them. `ambient` False (serve):
    $KUBECONFIG and ~/.kube/config only when a --context names one, so a kubeconfig lying around
    never turns a demo into writes to a cluster."""
    configuration = client.Configuration()
    try:
        path = kubeconfig_paths(kubeconfig, environ, ambient or bool(context))
        if path is None and environ.get("KUBERNETES_SERVICE_HOST"):
            if context:
                raise BridgeError(f"--context {context}: no kubeconfig to take it from (running in-cluster)")
            config.load_incluster_config(client_configuration=configuration)
            target = ApiTarget(configuration.host, "in-cluster service account")
        elif path is not None:
            contexts, current = config.list_kube_config_contexts(config_file=path)
            names = [c.get("name") for c in contexts or []]
            if context and context not in names:
                raise BridgeError(f"--context {context}: not in {path} (contexts: {', '.join(names) or 'none'})")
            config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                    persist_config=False)
            target = ApiTarget(configuration.host, f"kubeconfig {path}", context or (current or {}).get("name"))
        elif kubeconfig is None and not context:
            return None
        else:
            raise BridgeError("--context: no kubeconfig found ($KUBECONFIG, ~/.kube/config)")
    except (config.ConfigException, OSError, ValueError) as exc:
        raise BridgeError(f"kubeconfig: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise BridgeError(f"kubeconfig {path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from exc
    except (TypeError, AttributeError, KeyError, IndexError) as exc:  # YAML, but not a kubeconfig's shape
        raise BridgeError(f"kubeconfig {path}: not a kubeconfig ({type(exc).__name__}: {exc}); "
                          "see `kubectl config view`") from exc
    # Retrying inside an admission call would blow the webhook timeout; callers decide.
    configuration.retries = urllib3.Retry(total=0, connect=0, read=0) if not timeout_retries else None
    if not configuration.verify_ssl:  # said once, in our words, instead of urllib3's warning per request
        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        if target not in _CONNECTED:
            log.warning("TLS verification is off for %s (insecure-skip-tls-verify): anyone on the path can "
                        "answer as the API server", target)
    api = client.ApiClient(configuration)
    if request_timeout:
        _cap_requests(api, request_timeout)
    _CONNECTED.append(target)
    return api, target


def api_client(kubeconfig: str | None = None, timeout_retries: bool = False,
               context: str | None = None) -> client.ApiClient | None:
    """An ApiClient as `connect` finds one, or None when there is no cluster configured."""
    found = connect(kubeconfig, context, timeout_retries)
    return found[0] if found else None


def unreachable(target, exc: Exception) -> ClusterUnreachable:
    """One line for an API the command could not ask (refused, TLS, DNS, timeout, an error status)."""
    return ClusterUnreachable(f"cannot use the Kubernetes API at {target or 'the configured server'}: "
                              f"{why_failed(exc)} (check --kubeconfig/--context, or that the cluster is up)")


def last_target() -> ApiTarget | None:
    """Where the last `connect` of this process points: what a CLI command's failure names."""
    return _CONNECTED[-1] if _CONNECTED else None


_CONNECTED: list[ApiTarget] = []


def _cap_requests(api: client.ApiClient, seconds: float) -> None:
    """kubectl's --request-timeout: no single request waits longer (the caller's own bound, when
    shorter, stays)."""
    call = api.call_api

    def capped(*args, _request_timeout=None, **kwargs):
        bound = seconds if not isinstance(_request_timeout, (int, float)) else min(_request_timeout, seconds)
        return call(*args, _request_timeout=bound, **kwargs)
    api.call_api = capped


def probe(api: client.ApiClient, timeout_s: float = 3.0) -> str | None:
    """None when the API server answers GET /version; otherwise why not, in a few words. A server
    that answers but refuses us (401, 403) is reachable: what fails later is said there."""
    try:
        raw_get(api, "/version", timeout=timeout_s).release_conn()
    except ApiException as exc:
        return f"HTTP {exc.status}" if exc.status >= 500 else None
    except Exception as exc:  # noqa: BLE001 - refused, TLS, DNS, timeout: all said as one line
        return why_failed(exc)
    return None


# urllib3 names the connection first: "<...HTTPConnection object at 0x...>: " or "HTTPSConnection(host=..., port=...): ".
_CONNECTION_PREFIX = re.compile(r"^(<[^>]*>|\w+\([^)]*\)): ")


def why_failed(exc: Exception) -> str:
    """A failed call's cause in a few words (urllib3 and ApiException wrap it in their own text)."""
    if isinstance(exc, ApiException):
        message = _status_message(exc)
        return f"HTTP {exc.status}: {message}" if message else f"HTTP {exc.status} {exc.reason or ''}".strip()
    reason = getattr(exc, "reason", None) or exc  # urllib3 wraps the cause
    if not isinstance(reason, Exception):
        return str(reason)
    # Its message, not the repr of its arguments (a ProtocolError's is the message and the cause again).
    text = reason.args[0] if reason.args and isinstance(reason.args[0], str) else str(reason)
    return _CONNECTION_PREFIX.sub("", text)


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
        exc = ApiException(status=response.status, reason="")
        exc.body = response.read()  # api_message reads the Status's message from it, never the raw JSON
        raise exc
    return response.response


def raw_send(api: client.ApiClient, method: str, path: str, body: dict, query: list | None = None,
             content_type: str = "application/json", timeout=30) -> dict:
    """POST/PATCH a JSON body; the decoded answer, or ApiException (its body the API's Status)."""
    method, url, headers, _body, _post = api.param_serialize(
        method, path, query_params=query or [], header_params={"Accept": "application/json",
                                                                "Content-Type": content_type},
        auth_settings=["BearerToken"])
    response = api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
    data = response.read()
    if response.status >= 400:
        exc = ApiException(status=response.status, reason="")
        exc.body = data  # api_message reads the Status's message from it
        raise exc
    return orjson.loads(data) if data else {}


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
    """Every item of one collection (one GET, no paging); ClusterUnreachable (a BridgeError: the
    commands' exit 3) naming it on an API error."""
    try:
        response = raw_get(api, path, timeout=timeout)
    except ApiException as exc:
        raise ClusterUnreachable(f"list {path.rsplit('/', 1)[-1]}: API answered {exc.status}") from exc
    return orjson.loads(response.data).get("items") or []


def pages(api: client.ApiClient, path: str, selector: str | None = None, page_size: int = 500,
          timeout=30, fields: str | None = None):
    """Each page of one collection as it is read (limit + continue): (its items, the list's
    resourceVersion); ApiException on an error status. A caller that lets go of a page before
    asking for the next holds one decoded page at a time."""
    token = ""
    while True:
        query = [("limit", str(page_size))] + ([("labelSelector", selector)] if selector else []) \
            + ([("fieldSelector", fields)] if fields else []) + ([("continue", token)] if token else [])
        data = orjson.loads(raw_get(api, path, query, timeout).data)
        meta, items = data.get("metadata") or {}, data.get("items") or []
        del data  # nothing of this page is held here while the next one is read
        yield items, meta.get("resourceVersion") or ""
        del items
        token = meta.get("continue") or ""
        if not token:
            return


def list_pages(api: client.ApiClient, path: str, selector: str | None = None, page_size: int = 500,
               timeout=30, fields: str | None = None) -> tuple[list[dict], str]:
    """Every item of one collection, read in pages, and the list's resourceVersion (where a
    watch resumes); ApiException on an error status."""
    items, version = [], ""
    for page, page_version in pages(api, path, selector, page_size, timeout, fields):
        items += page
        version = page_version or version
    return items, version


def each_item(api: client.ApiClient, path: str, selector: str | None = None, page_size: int = 500,
              timeout=30, fields: str | None = None):
    """Every item of one collection, one page decoded at a time, read as the caller consumes
    them: a cluster's pods are never all held at once (the caller keeps what it reduces them to)."""
    for page, _version in pages(api, path, selector, page_size, timeout, fields):
        yield from page
        del page  # not held while the next page is read


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


def _status_message(exc: ApiException) -> str:
    """The API server's own message in the Status it answered with ("" when it sent none)."""
    try:
        body = orjson.loads(exc.body) if exc.body else {}
    except (orjson.JSONDecodeError, TypeError):
        return ""
    return str(body.get("message") or "") if isinstance(body, dict) else ""


def api_message(exc: ApiException) -> str:
    """`API answered 422: <the API server's own message>` (its Status says why: an admission
    policy's denial, a validation error), clipped for logs and warnings."""
    message = _status_message(exc)
    text = f"API answered {exc.status}" + (f": {message}" if message else f" {exc.reason or ''}".rstrip())
    return text if len(text) <= 400 else text[:397] + "..."
