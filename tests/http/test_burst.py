"""Issue 22: a burst of pods of one new shape. The API server calls our /validate while it
creates the template a /mutate review asked for; that call must never wait behind the /mutate
reviews waiting for the create (4 blocked workers stalled every pod until the API timeout and
admitted half of them unmigrated)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from tests.helpers import container, pod, review
from tests.http import server as srv
from tests.kube.fakeapi import FakeKube, Fault

RCT_PATH = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates"


def template_review(template: dict, uid: str) -> dict:
    req = review(template, uid=uid, kind="ResourceClaimTemplate")["request"]
    group = {"group": "resource.k8s.io", "version": "v1"}
    req["kind"] = req["requestKind"] = {**group, "kind": "ResourceClaimTemplate"}
    req["resource"] = {**group, "resource": "resourceclaimtemplates"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


class CallsOurValidate:
    """The fake API server's admission step: our /validate for every template written."""

    def __init__(self):
        self.server = None
        self.answers: list[tuple[float, dict]] = []
        self._lock = threading.Lock()

    def __call__(self, method, path, body):
        if not path.endswith("/resourceclaimtemplates") or self.server is None:
            return None
        started = time.monotonic()
        with self.server.client(timeout=5) as c:  # the API server's webhook timeout
            try:
                answer = c.post("/validate", content=orjson.dumps(template_review(body, f"v-{started}"))).json()
            except httpx.TimeoutException:
                return 500, "failed calling webhook validate.dra-bridge.io: context deadline exceeded"
        with self._lock:
            self.answers.append((time.monotonic() - started, answer["response"]))
        if not answer["response"]["allowed"]:
            return 400, answer["response"]["status"]["message"]
        return None


@pytest.fixture
def served(tmp_path):
    kube = FakeKube().start()
    kube.namespaces["team-a"] = {"dra-bridge.io/migrate": "enabled"}
    hook = CallsOurValidate()
    kube.admission = hook
    server = srv.start(tmp_path, "--kubeconfig", kube.kubeconfig(tmp_path / "kubeconfig"))
    hook.server = server
    yield server, kube, hook
    server.stop()
    kube.stop()


def burst(server, pods: list[dict], clients: int = 16) -> tuple[list[dict], list[float]]:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    with server.client(limits=limits) as c:
        def one(item):
            i, p = item
            started = time.monotonic()
            answer = c.post("/mutate", content=orjson.dumps(review(p, uid=f"u{i}"))).json()["response"]
            return answer, time.monotonic() - started
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(one, enumerate(pods)))
    return [r for r, _ in results], [t for _, t in results]


def migrated(answer: dict) -> bool:
    warnings = answer.get("warnings") or []
    return answer["allowed"] and "patch" in answer and not any("could not create" in w or "admitted unmigrated" in w for w in warnings)


def test_a_burst_of_a_new_shape_is_migrated_with_one_create(served):
    server, kube, hook = served
    shape = pod([container("train", {"nvidia.com/gpu": 2})])
    answers, latencies = burst(server, [shape] * 48)
    assert all(migrated(a) for a in answers), [a.get("warnings") for a in answers if not migrated(a)][:3]
    creates = [r for r in kube.writes() if r.path == RCT_PATH]
    assert len(creates) == 1
    # The API server's call for our own template was answered at once, not after the API timeout.
    [(validate_s, verdict)] = hook.answers
    assert verdict["allowed"] and validate_s < 1.0
    assert max(latencies) < 2.0, sorted(latencies)[-5:]


def test_several_new_shapes_at_once(served):
    server, kube, hook = served
    shapes = [pod([container("train", {"nvidia.com/gpu": n})]) for n in (1, 2, 3, 4, 5, 6, 7, 8)]
    answers, _ = burst(server, shapes * 6)
    assert all(migrated(a) for a in answers)
    assert len([r for r in kube.writes() if r.path == RCT_PATH]) == 8
    assert len(hook.answers) == 8 and all(s < 1.0 for s, _ in hook.answers)


def test_a_create_that_really_fails_follows_on_template_error_for_every_pod_of_the_burst(served):
    server, kube, hook = served
    kube.faults.append(Fault(status=403, delay_s=0.3, method="POST"))  # RBAC or an admission policy says no
    shape = pod([container("train", {"nvidia.com/gpu": 3})])
    answers, _ = burst(server, [shape] * 16)
    assert all(a["allowed"] and "patch" not in a for a in answers)  # onTemplateError: allow, unmigrated
    assert all(any("could not create ResourceClaimTemplate (API answered 403" in w for w in a["warnings"])
               for a in answers)
    assert len([r for r in kube.writes() if r.path == RCT_PATH]) == 1  # one call answered all sixteen
    again, _ = burst(server, [shape] * 4)  # the failure is not remembered as an answer
    assert all(migrated(a) for a in again)
    metrics = server.client().get("/metrics").text
    assert 'dra_bridge_migrations_total{result="template_error"} 16.0' in metrics
    assert "dra_bridge_template_ensure_calls_total 2.0" in metrics
