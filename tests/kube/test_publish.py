"""Publishing slices against a real HTTP server standing in for the API server."""

import dataclasses
import pathlib

import yaml

from app.kube import api_client_for_host
from app.reporter import PublishError, SlicePublisher, node_from_description
from tests.kube.fakeapi import Fault

FAKE = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake"


def node(name="h100x8"):
    return node_from_description(yaml.safe_load((FAKE / f"{name}.yaml").read_text()), name)


def publisher(fake, sleeps=None, **kw):
    fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "uid": "node-uid-1"}})
    return SlicePublisher(api_client_for_host(fake.url), "gpu-1", "gpu.nvidia.com",
                          sleep=(sleeps.append if sleeps is not None else (lambda s: None)), **kw)


def slices(fake):
    return {k[2]: v for k, v in fake.objects.items() if k[1] == "resourceslices"}


def test_first_publish_creates_slices_owned_by_the_node(fake_kube):
    result = publisher(fake_kube).publish(node())
    assert (result.generation, result.created) == (1, 1)
    [s] = slices(fake_kube).values()
    assert s["spec"]["pool"]["generation"] == 1 and len(s["spec"]["devices"]) == 8
    assert s["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "gpu-1",
                                                 "uid": "node-uid-1", "controller": True}]


def test_republishing_the_same_gpus_writes_nothing(fake_kube):
    pub = publisher(fake_kube)
    pub.publish(node())
    writes = len(fake_kube.writes())
    result = pub.publish(node())
    assert result.unchanged and len(fake_kube.writes()) == writes


def test_a_change_bumps_the_generation_and_updates_in_place(fake_kube):
    pub = publisher(fake_kube)
    pub.publish(node())
    gone = node()
    gone = dataclasses.replace(gone, gpus=gone.gpus[1:])  # a GPU disappeared
    result = pub.publish(gone)
    assert (result.generation, result.updated, result.created) == (2, 1, 0)
    [s] = slices(fake_kube).values()
    assert s["spec"]["pool"]["generation"] == 2 and len(s["spec"]["devices"]) == 7


def test_other_drivers_slices_are_left_alone(fake_kube):
    other = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpu-1-other"},
             "spec": {"driver": "gpu.example.com", "nodeName": "gpu-1", "pool": {"name": "gpu-1", "generation": 9,
                                                                                  "resourceSliceCount": 1}, "devices": []}}
    fake_kube.add_cluster_object("resourceslices", other)
    pub = publisher(fake_kube)
    pub.publish(node())
    pub.publish(dataclasses.replace(node(), gpus=()))
    assert pub.remove_all() == 1
    assert list(slices(fake_kube)) == ["gpu-1-other"]
    assert not [w for w in fake_kube.writes() if w.path.endswith("/gpu-1-other")]


def test_api_errors_are_retried_with_backoff(fake_kube):
    sleeps = []
    pub = publisher(fake_kube, sleeps)
    fake_kube.faults.append(Fault(status=500, method="POST", times=2))
    result = pub.publish(node())
    assert result.created == 1
    assert sleeps == [0.5, 1.0]


def test_persistent_errors_give_up_with_a_clear_error(fake_kube):
    pub = publisher(fake_kube, attempts=3)
    fake_kube.faults.append(Fault(status=503, method="GET", times=10))
    try:
        pub.publish(node())
    except PublishError as exc:
        assert "list resourceslices" in str(exc) and "503" in str(exc)
    else:
        raise AssertionError("expected PublishError")


def _with_failing_gpu(name="h100x8"):
    description = yaml.safe_load((FAKE / f"{name}.yaml").read_text())
    description["gpus"][3] = {**description["gpus"][3], "healthy": False, "xid": 79}
    return node_from_description(description, name)


def test_a_server_that_drops_taints_gets_slices_without_the_failing_gpu(fake_kube):
    """Issue 54: a 1.34/1.35 server drops device taints without a word. Each write is compared with
    what was stored; a dropped taint turns the gate off and the pool is written again at once,
    leaving the failing GPU out, never allocatable."""
    fake_kube.drops = (("resourceslices", ("spec", "devices", "*", "taints")),)
    pub = publisher(fake_kube)  # told nothing: the default release keeps taints
    result = pub.publish(_with_failing_gpu())
    assert [str(lost) for lost in result.dropped] == ["spec.devices[3].taints (feature gate DRADeviceTaints)"]
    assert not pub.release.has("DRADeviceTaints") and "writes showed DRADeviceTaints off" in pub.release.source
    [stored] = slices(fake_kube).values()
    assert [d["name"] for d in stored["spec"]["devices"]] == [f"gpu-{i}" for i in range(8) if i != 3]
    again = pub.publish(_with_failing_gpu())  # known now: nothing dropped, nothing written
    assert again.unchanged and again.dropped == []


def test_a_server_that_keeps_taints_keeps_the_failing_gpu_tainted(fake_kube):
    pub = publisher(fake_kube)
    assert pub.publish(_with_failing_gpu()).dropped == []
    [stored] = slices(fake_kube).values()
    assert stored["spec"]["devices"][3]["taints"][0]["key"] == "gpu.nvidia.com/xid"
