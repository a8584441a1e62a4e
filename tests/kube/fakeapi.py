"""A small real HTTP server standing in for the Kubernetes API server in tests.

It stores objects POSTed to collection URLs, answers GETs, and injects faults on request:
a status code, a delay, or a dropped connection. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

_NAMESPACED = re.compile(r"^/(?:api|apis/[^/]+)/[^/]+/namespaces/(?P<ns>[^/]+)/(?P<res>[^/]+)(?:/(?P<name>[^/?]+))?$")
_NAMESPACE = re.compile(r"^/api/v1/namespaces/(?P<name>[^/?]+)$")
_CLUSTER = re.compile(r"^/(?:api|apis/[^/]+)/[^/]+/(?P<res>resourceslices|deviceclasses|resourceclaims|devicetaintrules|nodes|pods|deployments|statefulsets|daemonsets|replicasets|jobs|cronjobs|resourcequotas|resourceclaimtemplates|priorityclasses)(?:/(?P<name>[^/?]+))?$")


ALL_NAMESPACES = {"pods", "resourceclaimtemplates", "resourceclaims", "deployments", "statefulsets", "daemonsets",
                  "replicasets", "jobs", "cronjobs", "resourcequotas"}


def _field(obj: dict, path: str):
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _selected(obj: dict, query: dict) -> bool:
    for term in filter(None, (query.get("fieldSelector") or "").split(",")):
        if "!=" in term:
            key, _, value = term.partition("!=")
            if str(_field(obj, key)) == value:
                return False
            continue
        key, _, value = term.partition("=")
        if str(_field(obj, key)) != value:
            return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (query.get("labelSelector") or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _dropped(body: dict, paths: list[tuple]) -> dict:
    """The body without the fields at `paths`, as a server with their gates off stores it."""
    import copy
    body = copy.deepcopy(body)

    def drop(node, path):
        if not path or node is None:
            return
        head, rest = path[0], path[1:]
        children = (list(enumerate(node)) if isinstance(node, list) else list(node.items()) if isinstance(node, dict)
                    else []) if head == "*" else ([(head, node.get(head))] if isinstance(node, dict) else [])
        for key, child in children:
            if not rest:
                if isinstance(node, dict):
                    node.pop(key, None)
            else:
                drop(child, rest)
    for path in paths:
        drop(body, path)
    return body


@dataclass
class Fault:
    status: int | None = None
    delay_s: float = 0.0
    drop: bool = False
    trickle_s: float = 0.0  # answer normally, one byte every trickle_s seconds
    times: int = 1  # how many matching requests it applies to
    method: str | None = None
    path_contains: str | None = None  # only requests whose path holds this


@dataclass
class Recorded:
    method: str
    path: str
    body: dict | None
    query: dict = field(default_factory=dict)


@dataclass
class FakeKube:
    objects: dict = field(default_factory=dict)  # (ns, resource, name) -> object
    namespaces: dict = field(default_factory=dict)  # name -> labels
    requests: list = field(default_factory=list)
    faults: list = field(default_factory=list)
    # As the API server calls admission webhooks: admission(method, path, body) before a write is
    # stored; a (status, message) it returns refuses the write.
    admission: object = None
    git_version: str = "v1.37.2"  # what /version answers
    # Gated fields this server drops on every write, as an API server with those DRA gates off
    # does: (resource, path under the object) where "*" is any list element or map key.
    drops: tuple = ()

    def __post_init__(self):
        self._lock = threading.Lock()
        self._rv = 100
        self.events: list = []  # (resourceVersion, resource, type, object)
        self.compacted_rv = 0
        self.pages = 0  # list pages served (limit/continue)
        self.drop_generation = 0
        self.stopping = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: dict, trickle_s: float = 0.0) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if not trickle_s:
                        self.wfile.write(data)
                    for i in range(len(data) if trickle_s else 0):  # never idle long enough to time out
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(trickle_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeouts under test)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                path, _, query_text = self.path.partition("?")
                query = {k: v[0] for k, v in parse_qs(query_text).items()}
                with fake._lock:
                    fake.requests.append(Recorded(method, path, body, query))
                    fault = fake._take_fault(method, path)
                if fault:
                    if fault.delay_s:
                        time.sleep(fault.delay_s)
                    if fault.drop:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if fault.status:
                        self._send(fault.status, _status(fault.status, "injected fault"))
                        return
                if method in ("POST", "PUT") and fake.admission is not None:
                    refused = fake.admission(method, path, body)
                    if refused:
                        self._send(refused[0], _status(refused[0], refused[1], "Invalid"))
                        return
                if method == "GET" and query.get("watch") in ("1", "true") and _CLUSTER.match(path):
                    self._watch(_CLUSTER.match(path)["res"], query)
                    return
                status, payload = fake._route(method, path, body, query)
                self._send(status, payload, fault.trickle_s if fault else 0.0)

            def _watch(self, res: str, query: dict) -> None:
                since = int(query.get("resourceVersion") or 0)
                deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.close_connection = True
                if since and since < fake.compacted_rv:
                    gone = {"type": "ERROR", "object": _status(410, "too old resource version", "Expired")}
                    self.wfile.write(json.dumps(gone).encode() + b"\n")
                    return
                generation = fake.drop_generation
                sent = since
                try:
                    while time.monotonic() < deadline and not fake.stopping:
                        if fake.drop_generation != generation:
                            return  # drop mid-stream
                        with fake._lock:
                            pending = [e for e in fake.events if e[0] > sent and e[1] == res
                                       and _selected(e[3], query)]
                        for rv, _res, kind, obj in pending:
                            self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                            self.wfile.flush()
                            sent = rv
                        time.sleep(0.02)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PUT(self):
                self._handle("PUT")

            def do_DELETE(self):
                self._handle("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FakeKube":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping = True
        self._server.shutdown()
        self._server.server_close()

    def writes(self) -> list[Recorded]:
        """Requests that change something (a server-side dry run changes nothing)."""
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")
                and r.query.get("dryRun") != "All"]

    def kubeconfig(self, path) -> str:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "users": [{"name": "fake", "user": {"token": "test-token"}}],
        }))
        return str(path)

    def _take_fault(self, method: str, path: str = "") -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method in (None, method) and (fault.path_contains or "") in path:
                fault.times -= 1
                return fault
        return None

    def _route(self, method: str, path: str, body: dict | None, query: dict | None = None) -> tuple[int, dict]:
        if path == "/version" and method == "GET":
            minor = self.git_version.lstrip("v").split(".")[1]
            return 200, {"major": "1", "minor": minor, "gitVersion": self.git_version}
        if body is not None and self.drops and method in ("POST", "PUT"):
            body = _dropped(body, [p for res, p in self.drops if f"/{res}" in path])
        if (query or {}).get("dryRun") == "All" and method in ("POST", "PUT"):
            return 201, body  # a server-side dry run: answered as stored, nothing kept
        cluster = _CLUSTER.match(path)
        if cluster:
            return self._cluster(method, cluster["res"], cluster["name"], body, query or {})
        if path == "/api/v1/namespaces" and method == "GET":
            return 200, {"apiVersion": "v1", "kind": "NamespaceList", "metadata": {}, "items": [
                {"metadata": {"name": name, "labels": labels}} for name, labels in sorted(self.namespaces.items())]}
        ns_match = _NAMESPACE.match(path)
        if ns_match and method == "GET":
            name = ns_match["name"]
            if name not in self.namespaces:
                return 404, _status(404, f'namespaces "{name}" not found', "NotFound")
            return 200, {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": name, "labels": self.namespaces[name]}}
        match = _NAMESPACED.match(path)
        if not match:
            return 404, _status(404, "no such path", "NotFound")
        ns, res, name = match["ns"], match["res"], match["name"]
        with self._lock:
            if method == "POST" and name is None:
                name = (body.get("metadata") or {}).get("name")
                key = (ns, res, name)
                if key in self.objects:
                    return 409, _status(409, f'{res} "{name}" already exists', "AlreadyExists")
                body.setdefault("metadata", {})["namespace"] = ns
                body["metadata"].setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                return 201, self._store(key, body)
            if method == "GET" and name is None:
                items = [o for (o_ns, r, _n), o in sorted(self.objects.items()) if o_ns == ns and r == res]
                return 200, {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": str(self._rv)},
                             "items": items}
            if method == "GET" and name:
                obj = self.objects.get((ns, res, name))
                # As the API server answers: the details name the object (a path it lacks has none).
                return (200, obj) if obj else (404, {**_status(404, f'{res} "{name}" not found', "NotFound"),
                                                     "details": {"name": name, "kind": res}})
            if method == "PUT" and name:
                if (ns, res, name) not in self.objects:
                    return 404, _status(404, "not found", "NotFound")
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent != self.objects[(ns, res, name)]["metadata"].get("resourceVersion"):
                    return 409, _status(409, "the object has been modified", "Conflict")
                return 200, self._store((ns, res, name), body)
            if method == "DELETE" and name:
                obj = self.objects.pop((ns, res, name), None)
                if obj is None:
                    return 404, _status(404, "not found", "NotFound")
                self._rv += 1
                self.events.append((self._rv, res, "DELETED", json.loads(json.dumps(obj))))
                return 200, obj
        return 405, _status(405, "method not allowed", "MethodNotAllowed")


    def _cluster(self, method: str, res: str, name: str | None, body: dict | None, query: dict):
        with self._lock:
            if method == "GET" and name is None:
                # Namespaced resources listed across namespaces (/api/v1/pods) hold every namespace's.
                items = [o for (ns, r, _n), o in sorted(self.objects.items())
                         if (ns == "" or res in ALL_NAMESPACES) and r == res and _selected(o, query)]
                meta = {"resourceVersion": str(self._rv)}
                if query.get("limit"):  # pages as the API server cuts them: limit + continue token
                    start, limit = int(query.get("continue") or 0), int(query["limit"])
                    items, rest = items[start:start + limit], len(items) > start + limit
                    if rest:
                        meta["continue"] = str(start + limit)
                    self.pages += 1
                return 200, {"apiVersion": "v1", "kind": "List", "metadata": meta, "items": items}
            key = ("", res, name or (body.get("metadata") or {}).get("name"))
            if method == "POST" and name is None:
                if key in self.objects:
                    return 409, _status(409, f'{res} "{key[2]}" already exists', "AlreadyExists")
                return 201, self._store(key, body)
            if key not in self.objects:
                return 404, _status(404, f'{res} "{key[2]}" not found', "NotFound")
            if method == "GET":
                return 200, self.objects[key]
            if method == "PUT":
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent and sent != self.objects[key]["metadata"].get("resourceVersion"):
                    return 409, _status(409, "the object has been modified", "Conflict")
                return 200, self._store(key, body)
            if method == "DELETE":
                obj = self.objects.pop(key)
                self._rv += 1
                self.events.append((self._rv, res, "DELETED", json.loads(json.dumps(obj))))
                return 200, obj
        return 405, _status(405, "method not allowed", "MethodNotAllowed")

    def _store(self, key: tuple, obj: dict) -> dict:
        self._rv += 1
        kind = "MODIFIED" if key in self.objects else "ADDED"
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        obj["metadata"].setdefault("uid", f"uid-{key[2]}")
        self.objects[key] = obj
        self.events.append((self._rv, key[1], kind, json.loads(json.dumps(obj))))
        return obj

    def delete_cluster_object(self, res: str, name: str) -> None:
        with self._lock:
            obj = self.objects.pop(("", res, name))
            self._rv += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self.events.append((self._rv, res, "DELETED", obj))

    def compact(self) -> None:
        """Forget history: watches from older resourceVersions get 410 Gone."""
        with self._lock:
            self.compacted_rv = self._rv + 1

    def drop_watches(self) -> None:
        self.drop_generation += 1

    def add_object(self, namespace: str, res: str, obj: dict) -> dict:
        obj.setdefault("metadata", {})["namespace"] = namespace
        with self._lock:
            return self._store((namespace, res, obj["metadata"]["name"]), obj)

    def add_cluster_object(self, res: str, obj: dict) -> dict:
        with self._lock:
            return self._store(("", res, obj["metadata"]["name"]), obj)


def _status(code: int, message: str, reason: str = "InternalError") -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message,
            "reason": reason, "code": code}
