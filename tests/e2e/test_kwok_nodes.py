"""Issue 48, first part: KWOK plays the kubelet of fake GPU nodes on the e2e control plane (pods
really reach Running, a deleted pod is finished after its grace period and its controller's
replacement runs), so tests need not mark pods Running themselves."""

from __future__ import annotations

import pytest

from tests.e2e import kwok
from tests.e2e.conftest import own_plane, wait_for

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def fleet(binaries, kwok_binary, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "kwok") as plane:
        runner = kwok.Kwok(plane, kwok_binary).start()
        try:
            runner.add_nodes([kwok.fake_node(f"kw-{i}", {"nvidia.com/gpu": "8"}) for i in range(3)])
            yield plane, runner
        finally:
            runner.stop()


def running(plane, selector: str) -> list[dict]:
    pods = plane.json("pods", "-n", "default", "-l", selector)["items"]
    return [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def test_fake_gpu_nodes_run_pods_and_finish_deleted_ones(fleet):
    plane, runner = fleet
    wait_for(lambda: all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                         for n in plane.json("nodes")["items"]), 60, f"KWOK's nodes Ready ({runner.log_path})")
    plane.apply([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "train", "namespace": "default"},
                  "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "train"}}, "template": {
                      "metadata": {"labels": {"app": "train"}},
                      "spec": {"terminationGracePeriodSeconds": 3, "containers": [{
                          "name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}])
    pods = wait_for(lambda: len(running(plane, "app=train")) == 4 and running(plane, "app=train"), 90,
                    "4 pods Running on KWOK's nodes")
    assert {p["spec"]["nodeName"] for p in pods} <= {"kw-0", "kw-1", "kw-2"}
    assert all(p["status"].get("podIP") for p in pods)
    gone = pods[0]["metadata"]["name"]
    plane.kubectl("delete", "pod", gone, "-n", "default", "--wait=false")
    wait_for(lambda: plane.kubectl("get", "pod", gone, "-n", "default", check=False).returncode != 0, 60,
             "the deleted pod finished after its grace period")
    wait_for(lambda: len(running(plane, "app=train")) == 4, 90, "its replacement Running")
