"""/validate on the real server process, inventory from a file."""

import time

import orjson
import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers import review
from tests.http import server as srv
from tests.unit.device_inventory import build_inventory


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("validate")
    inv = build_inventory()
    (tmp / "inventory.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                                        "items": inv.slices + list(inv.classes.values())}))
    (tmp / "policy.yaml").write_text("namespaces:\n- names: [strict]\n  mode: enforce\n  forbidLegacy: true\n")
    server = srv.start(tmp, "--inventory", str(tmp / "inventory.yaml"), "--policy", str(tmp / "policy.yaml"))
    yield server
    server.stop()


def claim(count):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                            "count": count}}]}}}


def post(client, payload):
    return client.post("/validate", content=orjson.dumps(payload))


def test_unsatisfiable_claim_denied_in_enforce_namespace(running):
    with running.client() as c:
        resp = post(c, review(claim(16), kind="ResourceClaim", namespace="strict")).json()["response"]
        assert resp["allowed"] is False and "needs 16" in resp["status"]["message"]
        # More than 32 devices in one claim: upstream's allocator stops with an error.
        resp = post(c, review(claim(64), kind="ResourceClaim", namespace="strict")).json()["response"]
        assert resp["allowed"] is False and "claim limit of 32" in resp["status"]["message"]
        ok = post(c, review(claim(8), kind="ResourceClaim", namespace="strict")).json()["response"]
        assert ok == {"uid": "uid-1", "allowed": True}


def test_warn_namespace_gets_warning(running):
    with running.client() as c:
        resp = post(c, review(claim(16), kind="ResourceClaim")).json()["response"]
        assert resp["allowed"] is True and any("needs 16" in w for w in resp["warnings"])


def _denied_count(client) -> float:
    key = 'dra_bridge_validations_total{kind="ResourceClaim",mode="enforce",result="denied"}'
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(key):
            return float(line.split()[-1])
    return 0.0


def test_dry_run_answer_is_identical_and_leaves_no_metric(running):
    with running.client() as c:
        before = _denied_count(c)
        dry = post(c, review(claim(64), kind="ResourceClaim", namespace="strict", dry_run=True, uid="same"))
        assert _denied_count(c) == before
        real = post(c, review(claim(64), kind="ResourceClaim", namespace="strict", uid="same"))
        assert _denied_count(c) == before + 1
        assert dry.content == real.content


def test_legacy_pod_denied_after_migration(running):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    with running.client() as c:
        resp = post(c, review(pod, namespace="strict")).json()["response"]
        assert resp["allowed"] is False and "legacy GPU requests are not allowed (c: nvidia.com/gpu)" in resp["status"]["message"]


def test_example_claim_through_the_endpoint(running):
    """Four 1g.5gb MIG devices of one parent: the A100 40GB test node has seven on GPU 1."""
    from app.common import read_objects
    [(_, template)] = read_objects(str(ROOT / "examples" / "claims" / "four-mig-1g5gb-same-gpu.yaml"))
    with running.client() as c:
        resp = post(c, review(template, kind="ResourceClaimTemplate", namespace="strict")).json()["response"]
        assert resp == {"uid": "uid-1", "allowed": True}


def test_live_inventory_server_is_ready_only_after_sync(tmp_path):
    from tests.kube.fakeapi import FakeKube
    from tests.kube.test_live_inventory import CLASS, slice_obj

    fake = FakeKube().start()
    try:
        fake.add_cluster_object("resourceslices", slice_obj("n1-s", "n1", 2))
        fake.add_cluster_object("deviceclasses", CLASS)
        server = srv.start(tmp_path, "--inventory", "live", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"))
        try:
            with server.client() as c:
                server.wait_ready(c)
                assert c.get("/readyz").json()["checks"]["inventory"] is True
                assert post(c, review(claim(2), kind="ResourceClaim")).json()["response"] == \
                    {"uid": "uid-1", "allowed": True}
                fake.add_cluster_object("resourceslices", slice_obj("n1-s", "n1", 4))
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    if post(c, review(claim(4), kind="ResourceClaim")).json()["response"].get("warnings") is None:
                        break
                    time.sleep(0.2)
                assert post(c, review(claim(4), kind="ResourceClaim")).json()["response"] == \
                    {"uid": "uid-1", "allowed": True}
        finally:
            server.stop()
    finally:
        fake.stop()


def test_stale_inventory_never_denies(tmp_path):
    from tests.kube.fakeapi import FakeKube, Fault
    from tests.kube.test_live_inventory import CLASS, slice_obj

    fake = FakeKube().start()
    try:
        fake.add_cluster_object("resourceslices", slice_obj("n1-s", "n1", 1))
        fake.add_cluster_object("deviceclasses", CLASS)
        (tmp_path / "policy.yaml").write_text("defaults:\n  mode: enforce\n")
        fake.faults.append(Fault(status=500, method="GET", times=100_000))  # never syncs
        server = srv.start(tmp_path, "--inventory", "live", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"),
                           "--policy", str(tmp_path / "policy.yaml"))
        try:
            with server.client() as c:
                assert c.get("/readyz").status_code == 503
                resp = post(c, review(claim(64), kind="ResourceClaim")).json()["response"]
                assert resp["allowed"] is True
                assert any("not synced" in w for w in resp["warnings"])
        finally:
            server.stop()
    finally:
        fake.stop()


def typed_claim(kind, *requests, attribute="kind"):
    """A claim whose requests select devices by an attribute (count, capacity request each)."""
    reqs = []
    for i, (count, memory) in enumerate(requests):
        exact = {"deviceClassName": "gpu.nvidia.com", "count": count, "selectors": [{"cel": {"expression": (
            f"'{attribute}' in device.attributes['gpu.nvidia.com'] && "
            f"device.attributes['gpu.nvidia.com'].{attribute} == '{kind}'")}}]}
        if memory:
            exact["capacity"] = {"requests": {"memory": memory}}
        reqs.append({"name": f"r{i}", "exactly": exact})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": reqs}}}


def partitioned_and_shared_slices() -> list[dict]:
    """On node n1: a GPU and its two halves drawing on one counter set (two slices), a GPU that
    allows multiple allocations; and a network-attached device for nodes in region `far`."""
    def device(name, kind, **extra):
        return {"name": name, "attributes": {"kind": {"string": kind}}, **extra}

    def consumes(amount):
        return [{"counterSet": "gpu-0", "counters": {"memory": {"value": amount}}}]

    pool = {"name": "n1-mig", "generation": 1, "resourceSliceCount": 2}
    base = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
    return [
        {**base, "metadata": {"name": "n1-mig-devices"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": pool, "devices": [
                device("whole", "whole", consumesCounters=consumes("40Gi")),
                device("half-0", "half", consumesCounters=consumes("20Gi")),
                device("half-1", "half", consumesCounters=consumes("20Gi"))]}},
        {**base, "metadata": {"name": "n1-mig-counters"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": pool,
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}},
        {**base, "metadata": {"name": "n1-shared"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1-shared", "generation": 1,
                                                                    "resourceSliceCount": 1},
            "devices": [device("shared-0", "shared", allowMultipleAllocations=True, capacity={"memory": {
                "value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi",
                                                                                    "step": "10Gi"}}}})]}},
        {**base, "metadata": {"name": "far-nic"}, "spec": {
            "driver": "gpu.nvidia.com", "pool": {"name": "far", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "region", "operator": "In", "values": ["far"]}]}]},
            "devices": [device("far-0", "far")]}},
    ]


def test_unusual_slices_in_the_live_inventory_keep_validation_up(tmp_path):
    """List attributes, a taint, a value nobody can use, a counter set, a shared device and a
    slice for other nodes: every claim gets upstream's verdict, readyz stays ready and names
    the device left out."""
    from tests.kube.fakeapi import FakeKube
    from tests.kube.test_live_inventory import CLASS, slice_obj

    fake = FakeKube().start()
    try:
        unusual = slice_obj("n1-s", "n1", 4)
        devices = unusual["spec"]["devices"]
        devices[0]["attributes"]["numas"] = {"ints": [0, 1]}
        devices[1]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
        devices[2]["attributes"]["driverVersion"] = {"version": "not-a-version"}
        fake.add_cluster_object("resourceslices", unusual)
        for extra in partitioned_and_shared_slices():
            fake.add_cluster_object("resourceslices", extra)
        fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": "n1", "labels": {"region": "near"}}})
        fake.add_cluster_object("deviceclasses", CLASS)
        (tmp_path / "policy.yaml").write_text("defaults:\n  mode: enforce\n")
        server = srv.start(tmp_path, "--inventory", "live", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"),
                           "--policy", str(tmp_path / "policy.yaml"))
        try:
            with server.client() as c:
                server.wait_ready(c)
                # Usable: device 0 (list attribute) and device 3; device 1 tainted, device 2 left out.
                gpus = typed_claim("gpu", (2, None), attribute="type")
                assert post(c, review(gpus, kind="ResourceClaim")).json()["response"] == \
                    {"uid": "uid-1", "allowed": True}
                denied = post(c, review(typed_claim("gpu", (3, None), attribute="type"),
                                        kind="ResourceClaim")).json()["response"]
                assert denied["allowed"] is False

                def allowed(obj):
                    return post(c, review(obj, kind="ResourceClaim")).json()["response"]["allowed"]

                # Counters: both halves fit in the GPU's 40Gi; the whole GPU and a half do not.
                assert allowed(typed_claim("half", (2, None)))
                assert allowed(typed_claim("whole", (1, None)))
                mixed = typed_claim("whole", (1, None))
                mixed["spec"]["devices"]["requests"].append(typed_claim("half", (1, None))["spec"]["devices"]
                                                            ["requests"][0] | {"name": "r1"})
                assert not allowed(mixed)
                # One shared device serves two requests of 40Gi; 90Gi is more than it has.
                assert allowed(typed_claim("shared", (1, "40Gi"), (1, "40Gi")))
                assert not allowed(typed_claim("shared", (1, "90Gi")))
                # The Node's labels say region `near`: the slice for region `far` is out of reach.
                assert not allowed(typed_claim("far", (1, None)))
                ready = c.get("/readyz")
                assert ready.status_code == 200
                assert ready.json()["detail"]["rejectedDeviceCount"] == 1
                assert "gpu-2" in ready.json()["detail"]["rejectedDevices"][0]
                assert "dra_bridge_inventory_rejected_devices 1.0" in c.get("/metrics").text
        finally:
            server.stop()
        assert "left out of the inventory" in server.log()
    finally:
        fake.stop()
