"""TemplateStore against a real HTTP server standing in for the API server."""

import time

import pytest

from app.common import TemplateEnsureError
from app.kube import NamespaceLabels, TemplateConflict, TemplateStore, api_client, api_client_for_host
from app.migration import plan_pod
from app.policy import default_policy
from tests.helpers import container, pod
from tests.kube.fakeapi import Fault

RCT = "resourceclaimtemplates"


def template(count=1, ns="team-a"):
    return plan_pod(pod([container("main", {"nvidia.com/gpu": count})]), default_policy().migration, ns).templates[0]


def test_creates_template_in_pod_namespace(fake_kube):
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template()
    store.ensure(t)
    stored = fake_kube.objects[("team-a", RCT, t["metadata"]["name"])]
    assert stored["spec"] == t["spec"]
    assert stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "dra-bridge"}
    [write] = fake_kube.writes()
    assert write.path == "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates"


def test_cache_hit_makes_no_api_call(fake_kube):
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template()
    store.ensure(t)
    store.ensure(t)
    assert store.cached(t)
    assert len(fake_kube.requests) == 1


def test_already_exists_is_success(fake_kube):
    t = template()
    fake_kube.objects[("team-a", RCT, t["metadata"]["name"])] = t
    store = TemplateStore(api_client_for_host(fake_kube.url))
    store.ensure(t)  # 409 from the server
    assert store.cached(t)


def test_two_replicas_agree_on_one_template(fake_kube):
    a, b = (TemplateStore(api_client_for_host(fake_kube.url)) for _ in range(2))
    a.ensure(template())
    b.ensure(template())
    assert len([k for k in fake_kube.objects if k[1] == RCT]) == 1


def test_server_error_raises_and_is_not_cached(fake_kube):
    fake_kube.faults.append(Fault(status=500))
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template()
    with pytest.raises(TemplateEnsureError, match="500"):
        store.ensure(t)
    assert not store.cached(t)
    store.ensure(t)  # recovers on the next pod
    assert store.cached(t)


def test_timeout_raises_within_the_budget(fake_kube):
    fake_kube.faults.append(Fault(delay_s=2.0))
    store = TemplateStore(api_client_for_host(fake_kube.url), timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(TemplateEnsureError, match="unreachable or too slow"):
        store.ensure(template())
    assert time.monotonic() - started < 1.5


def test_unreachable_api_raises():
    store = TemplateStore(api_client_for_host("http://127.0.0.1:9"), timeout_s=0.5)
    with pytest.raises(TemplateEnsureError):
        store.ensure(template())


def test_kubeconfig_file_is_honoured(fake_kube, tmp_path):
    api = api_client(fake_kube.kubeconfig(tmp_path / "kubeconfig"))
    TemplateStore(api).ensure(template(ns="from-kubeconfig"))
    assert fake_kube.writes()[0].path.startswith("/apis/resource.k8s.io/v1/namespaces/from-kubeconfig/")


def test_namespace_labels_are_read_and_cached(fake_kube):
    fake_kube.namespaces["ml"] = {"team": "ml"}
    labels = NamespaceLabels(api_client_for_host(fake_kube.url))
    assert labels.get("ml") == {"team": "ml"}
    assert labels.get("ml") == {"team": "ml"}
    assert len(fake_kube.requests) == 1
    assert labels.get("missing") == {}


def test_no_timer_makes_the_hot_path_call_again(fake_kube):
    """Issue 22: the cache expired every 60 s and the next burst re-created (and stalled). What
    exists is known from creates and the watch; time alone never sends a call."""
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template(3)
    store.ensure(t)
    calls = len(fake_kube.requests)
    time.sleep(0.2)
    for _ in range(50):
        store.ensure(t)
    assert store.cached(t) and len(fake_kube.requests) == calls


def test_a_burst_needing_one_template_makes_one_call(fake_kube):
    fake_kube.faults.append(Fault(delay_s=0.3, method="POST"))  # a slow create: everyone arrives while it runs
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template(2)
    futures = [store.submit(t) for _ in range(32)]
    assert all(f.result(timeout=5) is None for f in futures)
    assert len(fake_kube.writes()) == 1 and store.creates == 1 and store.cached(t)


def test_a_failed_create_is_every_waiter_s_answer_and_the_next_pod_tries_again(fake_kube):
    fake_kube.faults.append(Fault(status=403, delay_s=0.2, method="POST"))
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template(6)
    errors = [f.result(timeout=5) for f in [store.submit(t) for _ in range(8)]]
    assert len(fake_kube.writes()) == 1
    assert all(isinstance(e, TemplateEnsureError) and "403" in str(e) for e in errors)
    assert not store.cached(t)
    store.ensure(t)
    assert store.cached(t)


def test_templates_the_watch_lists_need_no_call_and_conflicts_are_found_in_memory(fake_kube):
    ours, other = template(1), template(2)
    store = TemplateStore(api_client_for_host(fake_kube.url))
    forged = {**other, "spec": {"spec": {"devices": {"requests": []}}}}
    store.resync([ours, forged])  # what a fresh replica's first list returns
    assert not store.cached(ours)  # seen, not yet compared with what a pod needs
    store.ensure(ours)
    assert store.cached(ours)
    with pytest.raises(TemplateConflict):
        store.ensure(other)
    assert fake_kube.requests == [] and store.conflicts == 1


def test_a_relist_forgets_deletes_the_watch_missed(fake_kube):
    store = TemplateStore(api_client_for_host(fake_kube.url))
    kept, gone = template(1), template(2)
    store.ensure(kept)
    store.ensure(gone)
    store.resync([kept])  # `gone` was deleted while the watch was down
    assert store.cached(kept) and not store.cached(gone)
    store.ensure(gone)
    assert len(fake_kube.writes()) == 3


def test_namespace_lookups_back_off_after_429(fake_kube):
    fake_kube.namespaces["busy"] = {"tier": "prod"}
    labels = NamespaceLabels(api_client_for_host(fake_kube.url), ttl_s=0.0, retry_s=0.5)
    assert labels.get("busy") == {"tier": "prod"}
    fake_kube.faults.append(Fault(status=429, times=100))
    before = len(fake_kube.requests)
    for _ in range(20):  # the last labels read answer; the API is asked once, not 20 times
        assert labels.get("busy") == {"tier": "prod"}
    assert len(fake_kube.requests) - before == 1
    fake_kube.faults.clear()
    time.sleep(0.6)
    fake_kube.namespaces["busy"] = {"tier": "dev"}
    assert labels.get("busy") == {"tier": "dev"}  # the failure was never cached as an answer


def test_api_timeout_is_a_deadline_for_a_trickling_api(fake_kube):
    """Issue 12: a server sending one byte at a time never trips a socket read timeout (it took
    19.5 s); --api-timeout bounds the whole call."""
    fake_kube.namespaces["slow"] = {"tier": "prod"}
    labels = NamespaceLabels(api_client_for_host(fake_kube.url), timeout_s=0.5)
    fake_kube.faults.append(Fault(trickle_s=0.05, times=1))
    started = time.monotonic()
    with pytest.raises(Exception, match="unknown"):
        labels.get("slow")
    assert time.monotonic() - started < 1.5
    store = TemplateStore(api_client_for_host(fake_kube.url), timeout_s=0.5)
    fake_kube.faults.append(Fault(trickle_s=0.05, times=1, method="POST"))
    started = time.monotonic()
    with pytest.raises(TemplateEnsureError, match="too slow"):
        store.ensure(template(7))
    assert time.monotonic() - started < 1.5


def test_a_template_the_server_stored_without_a_gated_field_is_removed_and_refused(fake_kube):
    """Issue 54: an API server with DRAPrioritizedList off drops `firstAvailable` (the aligned-GPU
    preference) without a word. What it stored is compared with what was sent: the damaged
    template is deleted, the create fails naming the field and the gate, and the metric counts it."""
    fake_kube.drops = (("resourceclaimtemplates", ("spec", "spec", "devices", "requests", "*", "firstAvailable")),)
    gates = []
    store = TemplateStore(api_client_for_host(fake_kube.url), on_dropped=gates.extend)
    t = template(count=2)
    assert "firstAvailable" in t["spec"]["spec"]["devices"]["requests"][0]
    with pytest.raises(TemplateEnsureError, match=r"dropped spec\.spec\.devices\.requests\[0\]\.firstAvailable "
                                                  r"\(feature gate DRAPrioritizedList\)"):
        store.ensure(t)
    assert gates == ["DRAPrioritizedList"]
    assert ("team-a", RCT, t["metadata"]["name"]) not in fake_kube.objects
    assert not store.cached(t)


def test_a_template_stored_whole_is_kept(fake_kube):
    gates = []
    store = TemplateStore(api_client_for_host(fake_kube.url), on_dropped=gates.extend)
    t = template(count=2)
    store.ensure(t)
    assert gates == [] and store.cached(t)
