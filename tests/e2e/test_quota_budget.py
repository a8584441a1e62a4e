"""Issue 34: a namespace's 4-GPU ResourceQuota holds while its pods move to DRA, on a control plane
of its own. Before: the class our templates use is not counted by the quota, so every GPU pod
stays on the device plugin (reason quota) and the quota refuses the fifth GPU. After applying
what `dra-bridge quota --budget one` prints (the class declaring nvidia.com/gpu): pods narrowed
by a HAMi annotation are rewritten, plain ones take the native path, and with pods on both sides
never more than 4 GPUs are held: the quota refuses the claim past it.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import Webhook, wait_for
from tests.e2e.test_brownfield import deployment
from tests.e2e.twonode import DRA_NODE, PLUGIN_NODE, dra_bridge, gpus_held, install

pytestmark = pytest.mark.timeout(600)
NAMESPACE = "budget"
TYPED = {"nvidia.com/use-gputype": "H100"}  # HAMi: narrows the devices, so not native


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    plane = ControlPlane(tmp_path_factory.mktemp("quota-budget"), binaries).start()
    webhook = None
    try:
        install(plane, {NAMESPACE: {"dra-bridge.io/migrate": "enabled"}})
        plane.apply([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": NAMESPACE},
                      "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}])
        webhook = Webhook(plane, "--template-gc-interval", "3600").start()
        plane.apply(webhook.configurations())
        yield plane
    finally:
        if webhook is not None:
            webhook.stop()
        plane.stop()


def live_pods(plane) -> list[dict]:
    return [p for p in plane.json("pods", "-n", NAMESPACE)["items"] if not p["metadata"].get("deletionTimestamp")]


def watch_budget(plane, until, seconds: float, what: str) -> list[dict]:
    """Polls until `until(pods)` holds, checking every time that at most 4 GPUs are held and the
    quota's `used` never says more than its limit."""
    deadline = time.monotonic() + seconds
    while True:
        pods = live_pods(plane)
        in_use = sum(gpus_held(plane, p) for p in pods)
        assert in_use <= 4, f"{what}: {in_use} GPUs held in a namespace whose budget is 4"
        used = plane.json("resourcequota", "gpus", "-n", NAMESPACE).get("status", {}).get("used") or {}
        assert int(used.get("requests.nvidia.com/gpu", 0)) <= 4, used
        if until(pods):
            return pods
        assert time.monotonic() < deadline, f"{what}: not reached in {seconds}s: " + ", ".join(
            f"{p['metadata']['name']} on {p['spec'].get('nodeName')} claims={bool(p['spec'].get('resourceClaims'))}"
            for p in pods)
        time.sleep(1)


def bound(pods, name) -> list[dict]:
    return [p for p in pods if p["metadata"]["labels"].get("app") == name and p["spec"].get("nodeName")]


def test_the_budget_holds_before_and_after_the_generated_class_with_pods_on_both_sides(plane):
    typed = deployment("typed", NAMESPACE, 3, {"nvidia.com/gpu": "1"})
    typed["spec"]["template"]["metadata"]["annotations"] = TYPED
    plane.apply([deployment("plain", NAMESPACE, 2, {"nvidia.com/gpu": "1"})])
    watch_budget(plane, lambda ps: len(bound(ps, "plain")) == 2, 60, "plain pods")
    plane.apply([typed])

    # Before: the quota would not count a claim, so nothing is rewritten; the quota refuses the
    # fifth GPU pod (its ReplicaSet cannot create it).
    pods = watch_budget(plane, lambda ps: len(bound(ps, "plain")) == 2 and len(bound(ps, "typed")) == 2,
                        90, "before")
    assert not any(p["spec"].get("resourceClaims") for p in pods)
    events = plane.kubectl("get", "events", "-n", NAMESPACE, "-o", "json").stdout
    assert "exceeded quota: gpus" in events

    # The DRA side of the budget, as dra-bridge prints it, applied by the admin.
    proposed = dra_bridge(plane, "quota", "--budget", "one")
    assert proposed.returncode == 1, proposed.stderr
    assert "extendedResourceName: nvidia.com/gpu" in proposed.stdout and "one budget" in proposed.stderr
    plane.kubectl("apply", "-f", "-", input=proposed.stdout)
    again = dra_bridge(plane, "quota", "--budget", "one")
    assert again.returncode == 0 and again.stdout == "", again.stderr

    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": NAMESPACE,
                                                             "annotations": TYPED},
             "spec": typed["spec"]["template"]["spec"]}

    def rewritten():
        out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe))
        return bool(json.loads(out.stdout)["spec"].get("resourceClaims"))
    wait_for(rewritten, 60, "the webhook seeing the class that counts its claims")

    # The typed pods are drained: they come back rewritten, beside the plain ones on the plugin.
    plane.kubectl("delete", "pods", "-n", NAMESPACE, "-l", "app=typed", "--wait=false")
    pods = watch_budget(plane, lambda ps: len(bound(ps, "typed")) == 2 and all(
        p["spec"].get("resourceClaims") for p in ps if p["metadata"]["labels"]["app"] == "typed"), 120, "after")
    typed_pods = [p for p in pods if p["metadata"]["labels"]["app"] == "typed"]
    assert len(typed_pods) == 3 and {p["spec"]["nodeName"] for p in bound(pods, "typed")} == {DRA_NODE}
    assert {p["spec"]["nodeName"] for p in bound(pods, "plain")} == {PLUGIN_NODE}
    # The third typed pod waits: the quota refused its claim, as it refuses a fifth GPU pod.
    def refused():
        return "exceeded quota: gpus" in plane.kubectl("get", "events", "-n", NAMESPACE, "--field-selector",
                                                       "reason=FailedResourceClaimCreation", "-o", "json").stdout
    wait_for(refused, 60, "the claim past the quota refused")
    watch_budget(plane, lambda ps: True, 10, "settled")
