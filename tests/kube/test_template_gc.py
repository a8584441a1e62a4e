"""Template garbage collection and cache forgetting against a real HTTP fake API server."""

import time

from app.kube import Lease, TemplateCollector, TemplateStore, TemplateWatch, api_client_for_host
from app.kube.template_gc import collectable
from app.migration import plan_pod
from app.policy import default_policy
from tests.helpers import container, pod

RCT = "resourceclaimtemplates"
HOUR = 3600.0


def template(count=1, ns="team-a"):
    return plan_pod(pod([container("main", {"nvidia.com/gpu": count})]), default_policy().migration, ns).templates[0]


def created_at(t, when):
    t["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    return t


def test_collectable_needs_grace_unused_and_age():
    old, young = created_at(template(1), time.time() - 2 * HOUR), created_at(template(2), time.time() + 60)
    used = created_at(template(3), time.time() - 2 * HOUR)
    key = lambda t: ("team-a", t["metadata"]["name"])  # noqa: E731
    now = time.time()
    delete, since = collectable([old, young, used], {key(used)}, {}, now, HOUR)
    assert delete == [] and set(since) == {key(old), key(young)}  # first seen unused: the clock starts
    delete, since = collectable([old, young, used], {key(used)}, since, now + HOUR, HOUR)
    assert delete == [key(old)]  # young is unused long enough but not old enough... yet
    delete, _ = collectable([old, young], {key(old)}, since, now + HOUR, HOUR)
    assert key(old) not in delete  # referenced again: kept, its clock reset


def referencing_pod(name, t, ns="team-a"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": t["metadata"]["name"]}]}}


class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


def collector(fake, identity="replica-a", clock=None, sleep=lambda s: None, **kw):
    api = api_client_for_host(fake.url)
    clock = clock or Clock()
    return TemplateCollector(api, Lease(api, "dra-bridge", "dra-bridge-template-gc", identity, 60, clock),
                             grace_s=HOUR, settle_s=0, clock=clock, sleep=sleep, **kw), clock


def put(fake, t, age_s=2 * HOUR):
    fake.objects[("team-a", RCT, t["metadata"]["name"])] = created_at(t, time.time() - age_s)


def test_unreferenced_templates_go_after_the_grace_period_and_others_stay(fake_kube):
    gone, used, young = template(1), template(2), template(3)
    foreign = created_at({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                          "metadata": {"name": "someone-elses", "namespace": "team-a"}, "spec": {}},
                         time.time() - 10 * HOUR)
    for t in (gone, used):
        put(fake_kube, t)
    put(fake_kube, young, age_s=-HOUR / 2)  # created half an hour before the second round
    fake_kube.objects[("team-a", RCT, "someone-elses")] = foreign
    fake_kube.objects[("team-a", "pods", "p")] = referencing_pod("p", used)
    counted = []
    gc, clock = collector(fake_kube, on_collected=counted.append)
    assert gc.run_once() == []  # the first round only starts the clocks
    clock.now += HOUR
    assert gc.run_once() == [("team-a", gone["metadata"]["name"])]
    names = {k[2] for k in fake_kube.objects if k[1] == RCT}
    assert names == {used["metadata"]["name"], young["metadata"]["name"], "someone-elses"}
    assert counted == [1]


def test_one_replica_collects_at_a_time_and_a_lapsed_lease_is_taken_over(fake_kube):
    clock = Clock()
    a, _ = collector(fake_kube, "replica-a", clock)
    b, _ = collector(fake_kube, "replica-b", clock)
    assert a.lease.acquire() and not b.lease.acquire()
    assert a.lease.acquire()  # renewal
    clock.now += 61
    assert b.lease.acquire() and not a.lease.acquire()
    lease = fake_kube.objects[("dra-bridge", "leases", "dra-bridge-template-gc")]
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    leader = []
    a.on_leader = leader.append
    assert a.run_once() == [] and leader == [False]
    assert not any(r.method == "DELETE" for r in fake_kube.requests)


def test_a_pod_admitted_while_collecting_gets_its_template_back(fake_kube):
    t = template(4)
    put(fake_kube, t)

    def pod_arrives(_s):  # during the settle wait: admitted with the webhook's cache still warm
        fake_kube.objects[("team-a", "pods", "late")] = referencing_pod("late", t)

    gc, clock = collector(fake_kube, sleep=pod_arrives)
    gc.run_once()
    clock.now += HOUR
    assert gc.run_once() == [("team-a", t["metadata"]["name"])]
    restored = fake_kube.objects[("team-a", RCT, t["metadata"]["name"])]
    assert restored["spec"] == t["spec"] and gc.restored == 1


def test_the_ensure_cache_forgets_a_template_deleted_by_anyone(fake_kube):
    store = TemplateStore(api_client_for_host(fake_kube.url))
    t = template(5)
    store.ensure(t)
    assert store.cached(t)
    forgot = []
    watch = TemplateWatch(api_client_for_host(fake_kube.url), store, timeout_s=5,
                          on_forgot=lambda: forgot.append(1)).start()
    try:
        time.sleep(0.3)  # the watch is open
        api = api_client_for_host(fake_kube.url)
        from kubernetes import client
        client.ResourceV1Api(api).delete_namespaced_resource_claim_template(t["metadata"]["name"], "team-a")
        deadline = time.monotonic() + 5
        while store.cached(t) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not store.cached(t) and forgot == [1]
        store.ensure(t)  # the next pod re-creates it
        assert ("team-a", RCT, t["metadata"]["name"]) in fake_kube.objects
    finally:
        watch.stop()


def wait_until(check, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.02)


def test_a_fresh_replica_knows_existing_templates_from_its_first_list(fake_kube):
    """Issue 22: a new replica started empty and every pod of an existing shape re-created."""
    t = template(6)
    fake_kube.add_object("team-a", RCT, {**t, "metadata": dict(t["metadata"])})
    store = TemplateStore(api_client_for_host(fake_kube.url))
    watch = TemplateWatch(api_client_for_host(fake_kube.url), store, timeout_s=5).start()
    try:
        assert watch.synced.wait(5)
        store.ensure(t)
        assert store.cached(t) and fake_kube.writes() == []
    finally:
        watch.stop()


def test_a_broken_watch_lists_again_and_forgets_what_it_missed(fake_kube):
    store = TemplateStore(api_client_for_host(fake_kube.url))
    kept, gone = template(7), template(8)
    store.ensure(kept)
    store.ensure(gone)
    watch = TemplateWatch(api_client_for_host(fake_kube.url), store, timeout_s=5, backoff_s=0.05).start()
    try:
        assert watch.synced.wait(5)
        fake_kube.stopping = True  # the watch stream ends...
        time.sleep(0.2)
        with fake_kube._lock:  # ...and a delete happens that no watch reports (history compacted)
            del fake_kube.objects[("team-a", RCT, gone["metadata"]["name"])]
        fake_kube.compact()
        fake_kube.stopping = False
        wait_until(lambda: not store.cached(gone))
        assert store.cached(kept)
    finally:
        watch.stop()


def test_a_failed_watch_names_its_cause_in_words():
    """Issue 32: the cause read `IncompleteRead(0 bytes read, 2 more expected)', IncompleteRead(...)))`."""
    import urllib3

    from app.kube.client import why_failed
    broken = urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead(0 bytes read, 2 more expected)",
                                              ValueError("IncompleteRead(0 bytes read, 2 more expected)"))
    assert why_failed(broken) == "Connection broken: IncompleteRead(0 bytes read, 2 more expected)"
    refused = urllib3.exceptions.MaxRetryError(None, "/apis", urllib3.exceptions.NewConnectionError(
        object(), "Failed to establish a new connection: [Errno 111] Connection refused"))
    assert why_failed(refused).endswith("[Errno 111] Connection refused")
    class Connection:  # as urllib3 2.x names it
        def __str__(self):
            return "HTTPSConnection(host='127.0.0.1', port=1)"
    named = urllib3.exceptions.NewConnectionError(Connection(), "Failed to establish a new connection: [Errno 111] "
                                                                "Connection refused")
    assert why_failed(named) == "Failed to establish a new connection: [Errno 111] Connection refused"


def test_the_template_watch_says_when_it_works_again_after_an_outage(fake_kube, caplog):
    """Issue 32: it logged the failure but never the recovery (only a watch that ended said so)."""
    from tests.kube.fakeapi import Fault
    caplog.set_level("INFO", logger="dra_bridge")
    fake_kube.faults.append(Fault(status=503, times=2, method="GET", path_contains="resourceclaimtemplates"))
    store = TemplateStore(api_client_for_host(fake_kube.url))
    watch = TemplateWatch(api_client_for_host(fake_kube.url), store, timeout_s=30, backoff_s=0.05).start()
    try:
        assert watch.synced.wait(5)
        wait_until(lambda: "template watch works again" in caplog.text)
        assert "template watch failed (HTTP 503" in caplog.text
    finally:
        watch.stop()
