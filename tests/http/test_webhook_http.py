"""The real server process over TLS on loopback, with a fake API server behind it."""

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import httpx
import orjson
import pytest
import yaml

from app import certs
from app.server import tls
from tests.helpers import container, pod, review, template_requests
from tests.http import server as srv
from tests.kube.fakeapi import FakeKube, Fault

RCT = "resourceclaimtemplates"


@pytest.fixture(scope="module")
def kube():
    fake = FakeKube().start()
    # The namespaces the webhook configurations select (their opt-in label): templates go only there.
    fake.namespaces.update({ns: {"dra-bridge.io/migrate": "enabled"} for ns in ("team-a", "strict")})
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def running(kube, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("srv")
    policy = tmp / "policy.yaml"
    policy.write_text("namespaces:\n- names: [strict]\n  onTemplateError: deny\n  onUnmigratable: deny\n")
    server = srv.start(tmp, "--kubeconfig", kube.kubeconfig(tmp / "kubeconfig"), "--policy", str(policy),
                       "--api-timeout", "0.5")
    server.policy_path = policy
    yield server
    server.stop()


@pytest.fixture
def client(running, kube):
    kube.faults.clear()
    with running.client() as c:
        yield c


def post(client, payload, path="/mutate"):
    return client.post(path, content=orjson.dumps(payload), headers={"Content-Type": "application/json"})


def decoded_patch(resp):
    return json.loads(base64.b64decode(resp["patch"]))


def test_legacy_pod_is_migrated_and_template_created(client, kube):
    p = pod([container("train", {"nvidia.com/gpu": 2})])
    r = post(client, review(p, uid="abc-1"))
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["uid"] == "abc-1" and resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    ops = decoded_patch(resp)
    assert {"op": "remove", "path": "/spec/containers/0/resources/limits"} in ops
    claim = next(o for o in ops if o["path"] == "/spec/resourceClaims")["value"][0]
    stored = kube.objects[("team-a", RCT, claim["resourceClaimTemplateName"])]
    assert template_requests(stored)[0]["exactly"]["count"] == 2
    assert any("migrated legacy GPU requests" in w for w in resp["warnings"])
    assert resp["auditAnnotations"]["migration"] == claim["resourceClaimTemplateName"]


def test_same_pod_shape_again_makes_no_api_call(client, kube):
    p = pod([container("again", {"nvidia.com/gpu": 1})])
    post(client, review(p, uid="first"))
    writes = len(kube.writes())
    post(client, review(p, uid="second"))
    assert len(kube.writes()) == writes


def test_dry_run_writes_nothing_and_answers_byte_identically(client, kube):
    p = pod([container("dry", {"nvidia.com/gpu": 3})], nodeSelector={"nvidia.com/gpu.family": "hopper"})
    writes = len(kube.writes())
    dry = post(client, review(p, uid="same", dry_run=True))
    assert len(kube.writes()) == writes
    real = post(client, review(p, uid="same", dry_run=False))
    assert len(kube.writes()) == writes + 1
    assert dry.content == real.content


def test_api_error_admits_pod_unmigrated_with_warning(client, kube):
    kube.faults.append(Fault(status=500, method="POST"))
    r = post(client, review(pod([container("e500", {"nvidia.com/gpu": 5})]), uid="e"))
    resp = r.json()["response"]
    assert r.status_code == 200 and resp["allowed"] is True
    assert "patch" not in resp
    assert any("could not create ResourceClaimTemplate" in w and "500" in w for w in resp["warnings"])


def test_slow_api_fails_open_within_the_webhook_timeout(client, kube):
    kube.faults.append(Fault(delay_s=3.0, method="POST"))
    started = time.monotonic()
    r = post(client, review(pod([container("slow", {"nvidia.com/gpu": 6})])))
    assert time.monotonic() - started < 2.0
    resp = r.json()["response"]
    assert resp["allowed"] is True and "patch" not in resp


def test_api_error_denies_where_policy_says_so(client, kube):
    kube.faults.append(Fault(status=500, method="POST"))
    r = post(client, review(pod([container("strict", {"nvidia.com/gpu": 7})]), namespace="strict"))
    resp = r.json()["response"]
    assert resp["allowed"] is False
    assert "could not create ResourceClaimTemplate" in resp["status"]["message"]


def test_unmigratable_pod_is_denied_where_policy_says_so(client):
    bad = pod([container("x", {"nvidia.com/gpu": "0.5"})])
    strict = post(client, review(bad, namespace="strict")).json()["response"]
    assert strict["allowed"] is False
    assert "spec.containers[0].resources.limits[nvidia.com/gpu]" in strict["status"]["message"]
    lenient = post(client, review(bad)).json()["response"]
    assert lenient["allowed"] is True and "patch" not in lenient
    assert any("not a whole number" in w for w in lenient["warnings"])


def test_pod_update_and_other_kinds_are_not_mutated(client):
    p = pod([container("u", {"nvidia.com/gpu": 1})])
    resp = post(client, review(p, operation="UPDATE")).json()["response"]
    assert resp == {"uid": "uid-1", "allowed": True}


def test_real_kube_review_deployment_is_allowed_without_patch(client, corpus):
    payload = json.loads((corpus / "admission" / "kube-review-readme-deployment-create.json").read_text())
    r = post(client, payload)
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["uid"] == payload["request"]["uid"] and resp["allowed"] is True and "patch" not in resp


def test_corpus_shaped_pod_review_round_trips(client, corpus):
    payload = json.loads((corpus / "admission" / "kube-review-readme-deployment-create.json").read_text())
    gpu_pod = yaml.safe_load((corpus / "legacy" / "nvdp-readme-gpu-pod.yaml").read_text())
    req = payload["request"]
    req.update(kind={"group": "", "version": "v1", "kind": "Pod"},
               resource={"group": "", "version": "v1", "resource": "pods"},
               requestKind={"group": "", "version": "v1", "kind": "Pod"}, object=gpu_pod, dryRun=True)
    resp = post(client, payload).json()["response"]
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    assert any(op["path"] == "/spec/resourceClaims" for op in decoded_patch(resp))


@pytest.mark.parametrize("body, field", [
    (b"{not json", ""),
    (b"[]", ""),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}), "apiVersion"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), "request"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}),
     "request.uid"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": "x"}}),
     "request.object"),
])
def test_malformed_reviews_get_400_naming_the_field(client, body, field):
    r = client.post("/mutate", content=body)
    assert r.status_code == 400
    assert r.json()["field"] == field
    assert r.json()["error"]


def test_bare_admission_request_from_corpus_is_400(client, corpus):
    body = (corpus / "admission" / "kubewarden-bare-admissionrequest-pod.json").read_bytes()
    r = client.post("/mutate", content=body)
    assert r.status_code == 400 and r.json()["field"] == "kind"


def test_fuzzer_fixture_review_never_500(client, corpus):
    body = (corpus / "admission" / "k8sapi-testdata-v1-admissionreview.json").read_bytes()
    r = client.post("/mutate", content=body)
    assert r.status_code in (200, 400)


def test_oversized_body_is_413(client):
    r = client.post("/mutate", content=b"x" * (3 * 1024 * 1024 + 1))
    assert r.status_code == 413


def test_oversized_chunked_body_is_413(client):
    def chunks():
        for _ in range(64):
            yield b"y" * 65536
    r = client.post("/mutate", content=chunks())
    assert r.status_code == 413


def test_health_readiness_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    post(client, review(pod([container("m", {"nvidia.com/gpu": 1})]), uid="metrics"))
    text = client.get("/metrics").text
    assert 'dra_bridge_admission_requests_total{endpoint="mutate",kind="Pod",outcome="migrated"}' in text
    assert "dra_bridge_admission_duration_seconds_bucket" in text
    assert "dra_bridge_template_ensure_errors_total" in text


def test_tls_1_2_negotiates_forward_secret_aead_cipher(running):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(running.ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ALL:@SECLEVEL=0")  # offer weak suites too: the server must not pick them
    port = int(running.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        with ctx.wrap_socket(sock, server_hostname="localhost") as tls_sock:
            name, version, _bits = tls_sock.cipher()
    assert version == "TLSv1.2"
    assert name.startswith("ECDHE-") and ("GCM" in name or "CHACHA20" in name)


def test_server_context_refuses_old_protocols():
    ctx = tls.server_context()
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    names = {c["name"] for c in ctx.get_ciphers()}
    assert not any("CBC" in n or "RC4" in n or "3DES" in n or n.startswith("AES") for n in names)


def test_log_has_one_listening_line_and_no_object_contents(running):
    log = running.log()
    assert sum("listening on https://127.0.0.1:" in line for line in log.splitlines()) == 1
    assert "cuda:12" not in log  # the image name is content, not a name


def test_policy_reload_keeps_last_good_and_applies_new(client, running):
    path = running.policy_path
    original = path.read_text()
    try:
        path.write_text("defaults:\n  onUnmigratable: maybe\n")
        time.sleep(0.8)
        bad = pod([container("x", {"nvidia.com/gpu": "0.5"})])
        assert post(client, review(bad)).json()["response"]["allowed"] is True  # still the old policy
        assert "policy reload rejected" in running.log() and "defaults.onUnmigratable" in running.log()
        path.write_text(original + "defaults:\n  onUnmigratable: deny\n")
        time.sleep(0.8)
        assert post(client, review(bad)).json()["response"]["allowed"] is False
    finally:
        path.write_text(original)
        time.sleep(0.8)


def _wait_served(running, ca_file, failure):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with httpx.Client(verify=ssl.create_default_context(cafile=ca_file)) as c:
                if c.get(running.url + "/healthz").status_code == 200:
                    return
        except httpx.HTTPError:
            time.sleep(0.2)
    pytest.fail(failure)


def test_rotated_certificate_is_served_without_restart(running):
    old_ca = open(running.ca).read()
    new_dir = running.cert_dir + "-new"
    bundle = certs.write_bundle(new_dir, ["localhost", "127.0.0.1"])
    os.replace(bundle.key, f"{running.cert_dir}/tls.key.new")
    os.replace(bundle.cert, f"{running.cert_dir}/tls.crt.new")
    # Key first then cert; between the two the pair mismatches and the old one stays in use.
    os.replace(f"{running.cert_dir}/tls.key.new", f"{running.cert_dir}/tls.key")
    os.replace(f"{running.cert_dir}/tls.crt.new", f"{running.cert_dir}/tls.crt")
    _wait_served(running, bundle.ca_cert, "rotated certificate was not picked up")
    with pytest.raises(httpx.HTTPError):
        with httpx.Client(verify=ssl.create_default_context(cadata=old_ca)) as c:
            c.get(running.url + "/healthz")
    # Later tests verify with running.ca: point it at the new CA.
    os.replace(bundle.ca_cert, running.ca)


def test_certificate_written_before_its_key_keeps_the_old_pair_serving(running):
    """Issue 12: many tools write tls.crt then tls.key; in between, every handshake failed."""
    new_dir = running.cert_dir + "-certfirst"
    bundle = certs.write_bundle(new_dir, ["localhost", "127.0.0.1"])
    os.replace(bundle.cert, f"{running.cert_dir}/tls.crt")  # the key still belongs to the old pair
    time.sleep(1.0)  # several reload rounds (0.2 s) see the mismatched pair
    with httpx.Client(verify=ssl.create_default_context(cafile=running.ca)) as c:
        assert c.get(running.url + "/healthz").status_code == 200  # the last good pair still serves
    os.replace(bundle.key, f"{running.cert_dir}/tls.key")
    _wait_served(running, bundle.ca_cert, "the completed pair was not picked up")
    os.replace(bundle.ca_cert, running.ca)


def _client_ca_and_cert(folder):
    """A CA and a clientAuth certificate it signed, as the API server would present."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(minutes=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / "client-ca.crt").write_bytes(ca.public_bytes(pem))
    (folder / "client.crt").write_bytes(cert.public_bytes(pem))
    (folder / "client.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))


def test_client_certificates_are_required_when_a_client_ca_is_set(tmp_path):
    _client_ca_and_cert(tmp_path)
    server_ca = tmp_path / "certs" / "ca.crt"
    certs.write_bundle(str(tmp_path / "certs"), ["localhost", "127.0.0.1"])
    port, health_port = srv.free_port(), srv.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--tls-cert", str(tmp_path / "certs/tls.crt"), "--tls-key", str(tmp_path / "certs/tls.key"),
                             "--client-ca", str(tmp_path / "client-ca.crt"), "--health-port", str(health_port)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with_cert = ssl.create_default_context(cafile=str(server_ca))
        with_cert.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
        deadline = time.monotonic() + 20
        while True:
            try:
                with httpx.Client(verify=with_cert) as c:
                    assert c.get(f"https://localhost:{port}/healthz").status_code == 200
                break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with pytest.raises(httpx.HTTPError):
            with httpx.Client(verify=ssl.create_default_context(cafile=str(server_ca))) as c:
                c.get(f"https://localhost:{port}/healthz")
        # Probes as kubelet sends them (plain HTTP, no certificate) on the health port; no reviews there.
        with httpx.Client() as c:
            assert c.get(f"http://127.0.0.1:{health_port}/healthz").status_code == 200
            assert c.get(f"http://127.0.0.1:{health_port}/readyz").json()["ready"] is True
            assert "dra_bridge_ready 1.0" in c.get(f"http://127.0.0.1:{health_port}/metrics").text
            assert c.post(f"http://127.0.0.1:{health_port}/validate", content=b"{}").status_code in (404, 405)
        proc.terminate()
        assert proc.wait(20) == 0  # both servers drained
    finally:
        if proc.poll() is None:
            proc.kill()


def test_missing_certificate_files_keep_the_last_good_one(tmp_path):
    bundle = certs.write_bundle(str(tmp_path), ["localhost"])
    reloader = tls.CertReloader(tls.server_context(), bundle.cert, bundle.key)
    assert reloader.check() and reloader.loaded
    os.rename(bundle.cert, bundle.cert + ".away")
    assert reloader.check() is False and reloader.loaded and "missing" in reloader.last_error
    os.rename(bundle.cert + ".away", bundle.cert)
    fresh = certs.write_bundle(str(tmp_path), ["localhost"])
    assert reloader.check() is True and reloader.reloads == 2 and reloader.last_error is None
    assert fresh.cert == bundle.cert


def _template_name_for(pod_obj):
    from app.migration import plan_pod
    from app.policy import default_policy
    return plan_pod(pod_obj, default_policy().migration, "team-a").templates[0]


def test_precreated_lookalike_template_is_never_used(client, kube):
    """Issue 12: the generated name is predictable; a user's own template of that name with
    another spec used to be taken as ours (409 read as success)."""
    obj = pod([container("w", {"nvidia.com/gpu": 5})])
    ours = _template_name_for(obj)
    name = ours["metadata"]["name"]
    poisoned = {**ours, "spec": {"spec": {"devices": {"requests": [{"name": "x", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "adminAccess": True}}]}}}}
    kube.objects[("team-a", RCT, name)] = poisoned
    resp = post(client, review(obj))
    body = resp.json()["response"]
    assert body["allowed"] is True and "patch" not in body
    assert any("not the one dra-bridge generates" in w for w in body["warnings"])
    assert "dra_bridge_template_conflicts_total 1.0" in client.get("/metrics").text
    assert post(client, review(obj)).json()["response"].get("patch") is None  # not remembered as ours


def test_existing_template_with_only_api_defaults_is_ours(client, kube):
    obj = pod([container("w", {"nvidia.com/gpu": 6})])
    ours = _template_name_for(obj)
    served = json.loads(json.dumps(ours))
    served["spec"]["metadata"] = {}
    for request in served["spec"]["spec"]["devices"]["requests"]:
        for alternative in request.get("firstAvailable") or [request["exactly"]]:  # what the API server defaults
            alternative.setdefault("allocationMode", "ExactCount")
    kube.objects[("team-a", RCT, ours["metadata"]["name"])] = served
    body = post(client, review(obj)).json()["response"]
    assert "patch" in body, body


def test_forged_review_cannot_make_us_write_outside_served_namespaces(client, kube):
    """Issue 12: an unauthenticated caller sent reviews for kube-system and got templates written
    there; only namespaces with the webhooks' opt-in label get templates."""
    obj = pod([container("w", {"nvidia.com/gpu": 3})])
    obj["metadata"]["namespace"] = "kube-system"
    body = post(client, review(obj, namespace="kube-system")).json()["response"]
    assert body["allowed"] is True and "patch" not in body
    assert any("not one the webhook serves" in w for w in body["warnings"])
    assert not [w for w in kube.writes() if "/namespaces/kube-system/" in w.path]


def test_serve_says_when_its_api_server_does_not_answer_and_does_not_flood_the_log(tmp_path):
    """Issue 25: `serve` logged "kubernetes: connected" to a server it never reached, then three
    urllib3 retry warnings per watch attempt. It says once that the API does not answer, serves
    anyway (pods are admitted unmigrated with a warning, per onTemplateError), and each retry is
    one line of ours with its cause."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{dead}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    running = srv.start(tmp_path, "--kubeconfig", str(kubeconfig))
    try:
        with running.client() as c:
            answer = c.post("/mutate", json=review(pod([container("train", {"nvidia.com/gpu": 1})]))).json()
        time.sleep(3)  # the template watch retries meanwhile
    finally:
        running.stop()
    log = running.log()
    assert f"kubernetes API at https://127.0.0.1:{dead} does not answer (" in log, log
    assert "kubernetes: unreachable at start" in log and "connected" not in log, log
    assert "Retrying" not in log and "urllib3" not in log, log
    assert "template watch failed (Failed to establish a new connection: [Errno 111] Connection refused)" in log, log
    assert answer["response"]["allowed"] is True
    assert any("admitted unmigrated" in w for w in answer["response"]["warnings"]), answer


def test_serve_says_its_api_server_is_reachable(tmp_path):
    fake = FakeKube().start()
    try:
        running = srv.start(tmp_path, "--kubeconfig", fake.kubeconfig(tmp_path / "kc"))
        running.stop()
    finally:
        fake.stop()
    assert "kubernetes: reachable" in running.log() and "does not answer" not in running.log()


def test_an_idle_review_connection_outlives_the_api_servers_own_idle_timeout(tmp_path):
    """The API server reuses a webhook connection for up to 90 s of idleness and does not retry an
    admission POST that meets a connection we closed: the pod would pass unmigrated. A connection
    idle past our old 5 s keep-alive still answers, and the server says it keeps them 120 s."""
    from app.cli import servecli

    assert servecli.KEEP_ALIVE_S > 90
    running = srv.start(tmp_path)
    try:
        context = ssl.create_default_context(cafile=running.ca)
        port = int(running.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as conn:
                request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
                conn.sendall(request)
                assert whole_response(conn).startswith(b"HTTP/1.1 200")
                time.sleep(6.5)
                conn.sendall(request)
                assert whole_response(conn).startswith(b"HTTP/1.1 200")
    finally:
        running.stop()


def whole_response(conn) -> bytes:
    """One HTTP/1.1 response read off the connection: headers, then Content-Length bytes."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = conn.recv(4096)
        assert chunk, "connection closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


REVIEW = orjson.dumps(review(pod([container("main", {"nvidia.com/gpu": 1})])))


def test_sigterm_drains_without_closing_a_connection_the_api_server_may_reuse(tmp_path):
    """Issue 32: a replica leaving closed keep-alive connections the API server was about to reuse
    (the admission POST failed, the pod passed unmigrated). On SIGTERM: not ready at once, every
    answer closes its connection, an idle connection is never closed by us, and the process stops
    once none is left."""
    health = srv.free_port()
    running = srv.start(tmp_path, "--drain-seconds", "30", "--health-port", str(health))
    try:
        context = ssl.create_default_context(cafile=running.ca)
        port = int(running.url.rsplit(":", 1)[1])
        request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
        busy = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                   server_hostname="localhost")
        idle = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                   server_hostname="localhost")
        for conn in (busy, idle):
            conn.sendall(request)
            assert whole_response(conn).startswith(b"HTTP/1.1 200")
        running.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with httpx.Client(base_url=f"http://127.0.0.1:{health}", timeout=5) as plain:
            ready = plain.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["serving"] is False
        busy.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(REVIEW)).encode() + b"\r\n\r\n" + REVIEW)
        answer = whole_response(busy)
        assert answer.startswith(b"HTTP/1.1 200") and b"connection: close" in answer.lower()
        assert busy.recv(1) == b""  # closed after its answer: the API server opens its next one elsewhere
        time.sleep(1.0)
        assert running.proc.poll() is None  # the idle connection is still open: ours to keep
        idle.sendall(request)  # and still answers, telling its client to go
        assert b"connection: close" in whole_response(idle).lower()
        idle.close()
        busy.close()
        assert running.proc.wait(10) == 0
        assert "drained: no connection left open" in running.log()
    finally:
        if running.proc.poll() is None:
            running.proc.kill()
