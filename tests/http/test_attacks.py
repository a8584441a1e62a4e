"""Issue 12: attacks from loopback on the real server process. Each reproduces what used to
freeze a replica or bypass enforcement, and asserts what holds now."""

import gc
import statistics
import subprocess
import sys
import time

import orjson
import pytest
import yaml

from tests.helpers import review
from tests.http import server as srv
from tests.unit.device_inventory import build_inventory

POLICY = ("namespaces:\n- names: [strict]\n  mode: enforce\n  allowedDeviceClasses: [gpu.nvidia.com]\n"
          "- names: [lenient]\n  mode: enforce\n  onInternalError: allow\n- names: [advice]\n  mode: warn\n")


def _inventory_file(tmp):
    inv = build_inventory()
    path = tmp / "inventory.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": inv.slices + list(inv.classes.values())}))
    return path


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    (tmp / "policy.yaml").write_text(POLICY)
    server = srv.start(tmp, "--inventory", str(_inventory_file(tmp)), "--policy", str(tmp / "policy.yaml"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hurried(tmp_path_factory):
    """A replica whose review deadline is shorter than the heavy claim below needs."""
    tmp = tmp_path_factory.mktemp("hurried")
    (tmp / "policy.yaml").write_text(POLICY)
    server = srv.start(tmp, "--inventory", str(_inventory_file(tmp)), "--policy", str(tmp / "policy.yaml"),
                       "--review-deadline", "0.02")
    yield server
    server.stop()


def claim(*selectors, device_class="gpu.nvidia.com"):
    exactly = {"deviceClassName": device_class, "count": 1}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}


def _fill(unit, separator, limit=10_000):
    return separator.join([unit] * ((limit + len(separator)) // (len(unit) + len(separator))))


def heavy_selectors():
    return [_fill("[1,2].all(x, x > 0)", " && "), _fill('"a" in device.attributes["x"]', " || "),
            _fill("cel.bind(x, 1, x == 1)", " && "), _fill("device.attributes[device.driver].size() > 0", " && "),
            _fill("[1,2].all(i, v, v > i)", " && "), _fill("[3,1].sortBy(x, x) == [1,3]", " && ")]


def _containers(n, prefix):
    return [{"name": f"{prefix}{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}} for i in range(n)]


def attacks():
    redos = "'" + "a" * 28 + "!'.find('(a+)+$') == ''"
    return [
        ("/validate", review(claim(redos), kind="ResourceClaim", namespace="strict", dry_run=True)),
        ("/validate", review(claim(*heavy_selectors()), kind="ResourceClaim", namespace="strict", dry_run=True)),
        ("/mutate", review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
                            "spec": {"containers": _containers(25_000, "c")}})),
        ("/mutate", review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
                            "spec": {"initContainers": _containers(10_000, "i"),
                                     "containers": _containers(10_000, "c")}})),
    ]


_ATTACKER = """
import sys, threading, time, httpx, ssl
url, ca, seconds, *files = sys.argv[1:]
bodies = [(f.split("@")[0], open(f.split("@")[1], "rb").read()) for f in files]
codes, ends = [], time.monotonic() + float(seconds)
def attack(path, body):
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=ca), timeout=30) as c:
        while time.monotonic() < ends:
            codes.append(c.post(path, content=body).status_code)
threads = [threading.Thread(target=attack, args=b) for b in bodies]
[t.start() for t in threads]
[t.join() for t in threads]
print(" ".join(map(str, codes)))
"""


@pytest.mark.parametrize("which", range(len(attacks())), ids=["redos", "long-selectors", "containers", "init"])
def test_healthz_answers_within_100ms_while_an_attack_runs(running, tmp_path, which):
    """The attacker runs in its own process: what is timed is the server, not our client."""
    path, payload = attacks()[which]
    body = tmp_path / "attack.json"
    body.write_bytes(orjson.dumps(payload))
    attacker = subprocess.Popen([sys.executable, "-c", _ATTACKER, running.url, running.ca, "3", f"{path}@{body}"],
                                stdout=subprocess.PIPE, text=True)
    latencies = []
    try:
        with running.client() as c:
            c.get("/healthz")
            time.sleep(0.7)  # the attack in flight
            ends = time.monotonic() + 2
            while time.monotonic() < ends:
                started = time.perf_counter()
                assert c.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)
    finally:
        out, _ = attacker.communicate(timeout=120)
    codes = out.split()
    assert codes and set(codes) == {"200"}
    # Was: seconds to minutes (ReDoS 81 s at 28 characters, 25k containers 15 s). Measured now:
    # max 5 ms (ReDoS), 30 ms (selectors), 15 ms for the 1.4-1.8 MB pods.
    # One sample over 100 ms (a scheduling hiccup on a shared 2-core machine, seen at 123-152 ms
    # in CI) is not the loop held: an attack that holds it stalls every probe for seconds.
    ordered = sorted(latencies)
    assert ordered[-2] < 0.1 and ordered[-1] < 0.3, (statistics.median(latencies), ordered[-3:])


def test_attacks_get_their_answers(running):
    with running.client() as c:
        for path, payload in attacks():
            resp = c.post(path, content=orjson.dumps(payload), timeout=30).json()["response"]
            if path == "/mutate":
                assert resp["allowed"] and "DRA limit of 32" in " ".join(resp["warnings"])
            else:
                assert isinstance(resp["allowed"], bool)  # a verdict, not a stall


def _post(server, payload):
    with server.client() as c:
        return c.post("/validate", content=orjson.dumps(payload), timeout=30).json()["response"]


def test_deadline_answer_follows_the_policy(hurried):
    heavy = claim(*heavy_selectors())
    denied = _post(hurried, review(heavy, kind="ResourceClaim", namespace="strict"))
    assert denied["allowed"] is False and "time limit" in denied["status"]["message"]
    allowed = _post(hurried, review(heavy, kind="ResourceClaim", namespace="lenient"))
    assert allowed["allowed"] is True and any("time limit" in w for w in allowed["warnings"])
    advice = _post(hurried, review(heavy, kind="ResourceClaim", namespace="advice"))
    assert advice["allowed"] is True and any("time limit" in w for w in advice["warnings"])
    with hurried.client() as c:
        metrics = c.get("/metrics").text
    assert 'dra_bridge_unfinished_reviews_total{endpoint="validate",reason="deadline"}' in metrics
    assert "not finished" in hurried.log()


def test_forged_kinds_do_not_grow_metrics(running):
    with running.client() as c:
        before = len(c.get("/metrics").text)
        for i in range(300):
            payload = review({"metadata": {"name": "x"}}, kind=f"Forged{i}")
            assert c.post("/validate", content=orjson.dumps(payload)).status_code == 200
        after = c.get("/metrics").text
    assert "Forged" not in after
    assert len(after) - before < 2000


@pytest.fixture(scope="module")
def impatient(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("impatient")
    server = srv.start(tmp, "--read-timeout", "0.5", "--max-connections", "5")
    yield server
    server.stop()


def _tls_socket(server):
    import socket
    import ssl
    host, port = server.url.split("//")[1].split(":")
    raw = socket.create_connection((host, int(port)), timeout=5)
    return ssl.create_default_context(cafile=server.ca).wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.mark.parametrize("sent", [b"", b"POST /validate HTTP/1.1\r\nHost: x\r\n",
                                  b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\""])
def test_idle_slowloris_and_short_body_connections_are_closed(impatient, sent):
    """Issue 12: such connections were never timed out (2,000 idle ones cost 545 MB)."""
    conn = _tls_socket(impatient)
    started = time.monotonic()
    if sent:
        conn.sendall(sent)
    try:
        assert conn.recv(1024) == b""  # closed by the server, no answer owed
    except ConnectionError:
        pass
    assert 0.4 < time.monotonic() - started < 3
    conn.close()
    with impatient.client() as c:
        assert c.get("/healthz").status_code == 200


def test_sigterm_finishes_in_flight_reviews_and_exits_zero(tmp_path):
    import signal
    server = srv.start(tmp_path)
    body = orjson.dumps(attacks()[2][1])  # a large review, in flight when SIGTERM arrives
    results = []

    def send():
        with server.client() as c:
            results.append(c.post("/mutate", content=body, timeout=30).status_code)

    import threading
    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)
    sender.join(30)
    assert server.proc.wait(20) == 0
    assert results == [200]


def test_request_strings_cannot_forge_log_lines_and_selectors_stay_out_of_the_log(running):
    forged = "uid-1\n2026-12-03 INFO dra_bridge forged line"
    secret = "device.attributes['gpu.nvidia.com'].productName == 'top-secret-model'"
    with running.client() as c:
        c.post("/validate", content=orjson.dumps(review(claim(secret), kind="ResourceClaim", namespace="strict",
                                                        uid=forged)))
        c.post("/mutate", content=orjson.dumps(review({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "p\nforged", "namespace": "x"}, "spec": {"containers": _containers(1, "c")}}, uid=forged)))
    log = running.log()
    assert "uid-1\\n2026-12-03" in log
    assert not any(line.startswith("2026-12-03 INFO dra_bridge forged") for line in log.splitlines())
    assert "top-secret-model" not in log


@pytest.mark.parametrize("obj_patch, field", [
    ({"metadata": "x"}, "request.object.metadata"),
    ({"metadata": None}, "request.object.metadata"),  # a patch against it could never apply
])
def test_forged_shapes_get_400_naming_the_field(running, obj_patch, field):
    payload = review({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": _containers(1, "c")}, **obj_patch})
    with running.client() as c:
        for path in ("/mutate", "/validate"):
            resp = c.post(path, content=orjson.dumps(payload))
            assert resp.status_code == 400 and resp.json()["field"] == field


def test_deep_json_is_400_without_a_traceback(running):
    payload = orjson.dumps(review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                   "spec": {"containers": _containers(1, "c"), "x": "DEEP"}}))
    deep = payload.replace(b'"DEEP"', b'{"a":' * 1000 + b"null" + b"}" * 1000)
    with running.client() as c:
        for path in ("/mutate", "/validate"):
            resp = c.post(path, content=deep)
            assert resp.status_code == 400 and "levels deep" in resp.json()["error"]
    assert "Traceback" not in running.log() and "RecursionError" not in running.log()


def test_client_disconnect_is_one_log_line(running):
    conn = _tls_socket(running)
    conn.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"apiVersion\"")
    time.sleep(0.2)
    conn.close()
    deadline = time.monotonic() + 5
    while "client disconnected" not in running.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running.log().count("client disconnected") >= 1
    assert "Traceback" not in running.log()


def test_huge_chunked_body_is_cut_off_at_the_limit(running):
    """A 50 MB chunked body: answered 413 and the connection closed, not read to its end."""
    conn = _tls_socket(running)
    conn.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    sent = 0
    try:
        while sent < 50 * 2**20:
            conn.sendall(chunk)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError, ssl_errors()):
        pass
    assert sent < 50 * 2**20, "the server read the whole 50 MB"
    conn.close()


def ssl_errors():
    import ssl
    return ssl.SSLError


def test_connections_beyond_the_limit_are_closed_at_once(impatient):
    held = [_tls_socket(impatient) for _ in range(5)]
    extra = []
    for _ in range(3):
        try:
            extra.append(_tls_socket(impatient))
        except OSError:
            extra.append(None)  # refused during the handshake: closed as well
    started = time.monotonic()
    for conn in extra:
        if conn is not None:
            try:
                assert conn.recv(1) == b""
            except ConnectionError:
                pass
    assert time.monotonic() - started < 0.4  # well before the 0.5 s read deadline
    for conn in held + [c for c in extra if c is not None]:
        conn.close()
    time.sleep(0.1)
    with impatient.client() as c:
        assert c.get("/healthz").status_code == 200


def test_healthz_answers_within_100ms_while_the_live_index_rebuilds(tmp_path):
    """Issue 12: the live index was rebuilt inside a request, on the loop (/healthz blocked 6 s
    at 100,000 devices). Now rebuilds run in the background: each DeviceClass change below
    forces a full one (~0.5 s for 12,000 devices here) while /healthz and reviews answer."""
    # The latencies are measured in this process: a full collection of pytest's heap (thousands of
    # tests' leftovers by now) would be counted as the server's. The server is what is judged.
    gc.collect()
    gc.disable()
    try:
        _healthz_during_rebuilds(tmp_path)
    finally:
        gc.enable()


def _healthz_during_rebuilds(tmp_path):
    from tests.kube.fakeapi import FakeKube
    from tests.kube.test_live_inventory import CLASS, slice_obj

    fake = FakeKube()
    for n in range(1500):
        fake.add_cluster_object("resourceslices", slice_obj(f"n{n}-s", f"n{n}", 8))
    fake.add_cluster_object("deviceclasses", CLASS)
    fake.events.clear()
    fake.start()
    try:
        server = srv.start(tmp_path, "--inventory", "live", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"))
        try:
            with server.client() as c:
                server.wait_ready(c, 60)
                latencies, verdicts = [], []
                ends = time.monotonic() + 4
                flip = 0
                while time.monotonic() < ends:
                    flip += 1
                    changed = {**CLASS, "metadata": {**CLASS["metadata"], "labels": {"flip": str(flip)}}}
                    fake.add_cluster_object("deviceclasses", changed)  # a full rebuild each time
                    for _ in range(5):
                        started = time.perf_counter()
                        assert c.get("/healthz").status_code == 200
                        latencies.append(time.perf_counter() - started)
                        time.sleep(0.02)
                    body = orjson.dumps(review(claim(), kind="ResourceClaim", namespace="advice"))
                    verdicts.append(c.post("/validate", content=body).json()["response"]["allowed"])
        finally:
            server.stop()
    finally:
        fake.stop()
    assert all(verdicts)
    assert max(latencies) < 0.1, (statistics.median(latencies), max(latencies))
