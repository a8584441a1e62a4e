"""Live inventory against the fake API server: list, watch events, dropped watch, 410 Gone."""

import time

import pytest

from app.dra import LiveIndex
from app import kube
from app.kube import LiveInventory, api_client_for_host
from tests.kube.fakeapi import Fault


def slice_obj(name, node, devices=1):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(devices)]}}


CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}


def eventually(check, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    raise AssertionError("condition not reached")


@pytest.fixture
def live(fake_kube):
    fake_kube.add_cluster_object("resourceslices", slice_obj("n1-s", "n1", 2))
    fake_kube.add_cluster_object("deviceclasses", CLASS)
    fake_kube.add_cluster_object("resourceslices", slice_obj("n3-s", "n3", 0))
    inv = LiveInventory(api_client_for_host(fake_kube.url), LiveIndex, watch_timeout_s=5, backoff_s=0.1,
                        rebuild_interval_s=0, stale_after_s=0.5, page_size=1)
    assert not inv.ready
    inv.start()
    assert inv.wait_synced(5)
    yield inv
    inv.stop()


def test_initial_list_syncs_and_indexes(live, fake_kube):
    assert live.ready
    assert fake_kube.pages >= 3  # listed a page at a time (limit/continue), never all at once
    assert live.index().device_count == 2
    assert set(live.index().classes) == {"gpu.nvidia.com"}


def test_watch_add_modify_delete(live, fake_kube):
    fake_kube.add_cluster_object("resourceslices", slice_obj("n2-s", "n2", 1))
    eventually(lambda: live.index().device_count == 3)
    fake_kube.add_cluster_object("resourceslices", slice_obj("n2-s", "n2", 4))  # MODIFIED
    eventually(lambda: live.index().device_count == 6)
    fake_kube.delete_cluster_object("resourceslices", "n1-s")
    eventually(lambda: live.index().device_count == 4)
    assert live.full_builds == 1  # every watch event applied incrementally


def test_allocated_devices_come_from_claim_status(live, fake_kube):
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}}}}
    fake_kube.add_cluster_object("resourceclaims", claim)
    eventually(lambda: ("gpu.nvidia.com", "n1", "gpu-0") in live.index().allocated)


def test_dropped_watch_resumes_without_losing_events(live, fake_kube):
    fake_kube.drop_watches()
    fake_kube.add_cluster_object("resourceslices", slice_obj("n3-s", "n3", 1))
    eventually(lambda: live.index().device_count == 3)
    assert live.relists == 0


def test_410_gone_triggers_a_relist(live, fake_kube):
    fake_kube.compact()
    fake_kube.drop_watches()
    fake_kube.add_cluster_object("resourceslices", slice_obj("n4-s", "n4", 1))
    eventually(lambda: live.relists >= 1 and live.index().device_count == 3)


def test_readiness_goes_stale_while_the_api_fails_and_recovers(live, fake_kube):
    fake_kube.faults.append(Fault(status=500, method="GET", times=10_000))
    fake_kube.drop_watches()
    eventually(lambda: not live.ready, timeout=8)
    fake_kube.faults.clear()
    eventually(lambda: live.ready, timeout=8)


def test_reviews_never_wait_for_a_rebuild(fake_kube):
    """Issue 12: the index was rebuilt inside a request (6 s at 100,000 devices). Now a
    background thread rebuilds; readers get the newest index built, at once."""
    fake_kube.add_cluster_object("resourceslices", slice_obj("n1-s", "n1", 2))
    fake_kube.add_cluster_object("deviceclasses", CLASS)
    slow = {"on": False}

    class SlowIndex(LiveIndex):
        def slice_changed(self, name, obj):
            if slow["on"]:
                time.sleep(1.5)
            return super().slice_changed(name, obj)

    inv = LiveInventory(api_client_for_host(fake_kube.url), SlowIndex, watch_timeout_s=5, backoff_s=0.1,
                        rebuild_interval_s=0).start()
    try:
        assert inv.wait_synced(5)
        eventually(lambda: inv.builds >= 1 and inv.index().device_count == 2)
        slow["on"] = True
        fake_kube.add_cluster_object("resourceslices", slice_obj("n2-s", "n2", 1))
        eventually(lambda: inv._build_lock.locked())  # the slow rebuild is under way
        started = time.perf_counter()
        assert inv.index().device_count == 2  # the previous index, without waiting
        assert time.perf_counter() - started < 0.05
        eventually(lambda: inv.index().device_count == 3)
        assert inv.last_build_s >= 1.5
    finally:
        inv.stop()


def test_issue_23_device_plugin_gpus_and_gpu_quotas_are_watched_and_heartbeats_cost_nothing(live, fake_kube):
    """The path choice reads what device plugins advertise (Node allocatable) and GPU quotas; a
    Node status update that changes neither (the kubelet's periodic report) builds nothing."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dp-1", "labels": {"pool": "a"}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"},
                       "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t0"}]}}
    fake_kube.add_cluster_object("nodes", node)
    eventually(lambda: (live.index().node_resources or {}).get("dp-1") == {"nvidia.com/gpu": 4})
    builds = live.full_builds
    for beat in range(5):
        node["status"]["conditions"][0]["lastHeartbeatTime"] = f"t{beat + 1}"
        node["status"]["allocatable"]["cpu"] = "8"
        fake_kube.add_cluster_object("nodes", node)
    fake_kube.add_object("team-a", "resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "4", "pods": "10"}}, "status": {"used": {"pods": "1"}}})
    eventually(lambda: (live.index().quotas or {}).get("team-a") == [("gpus", {"requests.nvidia.com/gpu": "4"})])
    assert live.full_builds == builds + 1  # the quota; the heartbeats changed nothing kept
    node["status"]["allocatable"].pop("nvidia.com/gpu")  # the device plugin left: the node moved to DRA
    fake_kube.add_cluster_object("nodes", node)
    eventually(lambda: live.index().node_resources.get("dp-1") == {})
    node["spec"] = {"unschedulable": True}  # cordoned (a drain, a rollout): no room for new pods
    fake_kube.add_cluster_object("nodes", node)
    eventually(lambda: live.index().cordoned == frozenset({"dp-1"}))
    node["spec"] = {}
    fake_kube.add_cluster_object("nodes", node)
    eventually(lambda: live.index().cordoned == frozenset())


def test_issue_24_device_taint_rules_taint_the_devices_they_select(live, fake_kube):
    from app import dra
    claim = dra.parse_claim_spec({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 2}}]}})
    assert dra.check(claim, live.index()).status == "satisfiable"
    fake_kube.add_cluster_object("devicetaintrules", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "xid-79"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"},
                 "taint": {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}}})
    eventually(lambda: dra.check(claim, live.index()).status == "never")
    fake_kube.delete_cluster_object("devicetaintrules", "xid-79")
    eventually(lambda: dra.check(claim, live.index()).status == "satisfiable")


def test_issue_24_a_cluster_that_serves_no_device_taint_rules_is_still_ready(fake_kube):
    """Before 1.37 resource.k8s.io/v1 has no DeviceTaintRule: a 404 means none, not an outage."""
    fake_kube.add_cluster_object("deviceclasses", CLASS)
    fake_kube.faults.append(Fault(status=404, times=1000, method="GET", path_contains="devicetaintrules"))
    inv = LiveInventory(api_client_for_host(fake_kube.url), LiveIndex, watch_timeout_s=5, backoff_s=0.1,
                        rebuild_interval_s=0, stale_after_s=0.5).start()
    try:
        assert inv.wait_synced(5)
        time.sleep(0.8)  # past stale_after_s: a failing watch would have made it not ready
        assert inv.ready and inv.index().classes
    finally:
        inv.stop()


def test_issue_25_metrics_say_the_certificate_expiry_readiness_checks_and_a_failing_watch(live, fake_kube, tmp_path):
    """What the PrometheusRule alerts on: the serving certificate's expiry (365 days after
    `dra-bridge certs`), each readiness check, and how long a watched resource has failed."""
    import datetime

    from cryptography import x509

    from app.certs import write_bundle
    from app.server import Metrics, PolicyHolder, ServiceState, tls

    write_bundle(str(tmp_path), ["localhost"])
    certs = tls.CertReloader(tls.server_context(None), str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, certs=certs, live=live)

    def sample(name, **labels):
        return metrics.registry.get_sample_value(name, labels)

    state.tick()
    expiry = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes()).not_valid_after_utc
    assert sample("dra_bridge_serving_certificate_expiry_timestamp_seconds") == expiry.timestamp()
    assert expiry - datetime.datetime.now(datetime.timezone.utc) > datetime.timedelta(days=364)
    assert sample("dra_bridge_readiness_check", check="certificates") == 1
    assert sample("dra_bridge_readiness_check", check="inventory") == 1
    assert sample("dra_bridge_inventory_watch_failing_seconds", resource="resourceslices") == 0
    fake_kube.faults.append(Fault(status=500, method="GET", times=10_000))
    fake_kube.drop_watches()
    eventually(lambda: not live.ready, timeout=8)
    # Readiness goes when the first resource has failed for 0.5 s; resourceslices may have
    # started failing a little after it.
    eventually(lambda: state.tick() or sample("dra_bridge_inventory_watch_failing_seconds",
                                              resource="resourceslices") > 0.5, timeout=8)
    assert sample("dra_bridge_readiness_check", check="inventory") == 0 and sample("dra_bridge_ready") == 0
    fake_kube.faults.clear()
    eventually(lambda: live.ready, timeout=8)
    state.tick()
    assert sample("dra_bridge_inventory_watch_failing_seconds", resource="resourceslices") == 0


def test_issue_47_priority_classes_are_watched_for_the_path_choice(live, fake_kube):
    """What preemption is decided by reaches the webhook's facts: PriorityClasses, kept small."""
    from app.application import cluster_facts
    from app.policy import default_policy

    fake_kube.add_cluster_object("priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "serving"},
        "value": 1000, "description": "x" * 500})
    eventually(lambda: live.index().priority_classes)
    [kept] = live.index().priority_classes
    assert kept["value"] == 1000 and "description" not in kept
    facts = cluster_facts(default_policy(), live.index())
    assert facts.path.preemption.classes["serving"].value == 1000


def test_a_full_build_takes_unchanged_slices_from_the_last_even_after_one_failed(fake_kube):
    """Issue 48: full builds (here a DeviceClass change) reuse the devices of slices whose bytes
    did not change, so a rebuild never holds two copies of them; a build that fails hands the
    next one what it would have taken."""
    for node in ("n1", "n2", "n3"):
        fake_kube.add_cluster_object("resourceslices", slice_obj(f"{node}-s", node, 2))
    fake_kube.add_cluster_object("deviceclasses", CLASS)
    built = []

    class FlakyIndex(LiveIndex):
        def __init__(self, *args, previous=None, **kwargs):
            built.append(previous)
            if len(built) == 2:
                raise RuntimeError("a bug in one build")
            super().__init__(*args, previous=previous, **kwargs)

    inv = LiveInventory(api_client_for_host(fake_kube.url), FlakyIndex, watch_timeout_s=5, backoff_s=0.1,
                        rebuild_interval_s=0).start()
    try:
        assert inv.wait_synced(5)
        eventually(lambda: inv.builds >= 1 and inv.index().device_count == 6)
        first = inv.index()
        fake_kube.add_cluster_object("deviceclasses", {**CLASS, "metadata": {"name": "other"}})
        eventually(lambda: len(built) >= 3 and inv.index() is not first)
        assert built[1] is not None and built[2] is built[1]  # the failed build's previous, handed on
        assert inv._live.build.cache.reused == 3 and set(inv.index().classes) == {"gpu.nvidia.com", "other"}
        kept = {d.key: d for d in first.devices}
        assert all(kept[d.key] is d for d in inv.index().devices)  # the very same device objects
    finally:
        inv.stop()
