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
