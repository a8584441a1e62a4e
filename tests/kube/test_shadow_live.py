"""Issue 14: the shipped setup, end to end over HTTP. The reporter (shadow mode, fake GPUs)
publishes into a fake API server; the webhook's live inventory reads it; NVIDIA's demo claims
are satisfiable against the shadow devices and an impossible claim is denied in enforce."""

import subprocess
import sys

import orjson
import pytest
from starlette.testclient import TestClient

from app import dra, kube
from app.common import read_objects
from app.reporter import render
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.conftest import CORPUS, CORPUS_ABSENT, ROOT
from tests.helpers import review

FAKE = ROOT / "app" / "data" / "fake"


def publish_shadow(fake, tmp_path, node, description):
    fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": f"u-{node}"}})
    result = subprocess.run([sys.executable, "-m", "app", "reporter", "--backend", f"fake:{FAKE / description}",
                             "--node-name", node, "--mode", "shadow", "--kubeconfig",
                             fake.kubeconfig(tmp_path / f"{node}.kubeconfig"), "--max-rounds", "1",
                             "--health-port", "0"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def webhook(fake_kube, tmp_path):
    publish_shadow(fake_kube, tmp_path, "gpu-h100-0", "h100x8.yaml")
    publish_shadow(fake_kube, tmp_path, "gpu-a100-0", "a100-mig.yaml")
    for c in render.device_classes():  # NVIDIA's chart installs these; they select gpu.nvidia.com only
        fake_kube.add_cluster_object("deviceclasses", c)
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaults:\n  mode: enforce\n")
    live = kube.LiveInventory(kube.api_client_for_host(fake_kube.url), dra.LiveIndex, watch_timeout_s=5).start()
    assert live.wait_synced(10)
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(str(policy), metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, live=live)
    with TestClient(create_app(state)) as client:
        yield client
    live.stop()


def validate(client, obj):
    body = review(obj, kind=obj["kind"], namespace="gpu-test")
    return client.post("/validate", content=orjson.dumps(body)).json()["response"]


def test_shadow_slices_carry_the_other_driver_and_the_label(fake_kube, tmp_path):
    publish_shadow(fake_kube, tmp_path, "n1", "l4x4.yaml")
    [s] = [o for k, o in fake_kube.objects.items() if k[1] == "resourceslices"]
    assert s["spec"]["driver"] == "shadow.gpu.dra-bridge.io"
    assert s["metadata"]["labels"]["dra-bridge.io/shadow-of"] == "gpu.nvidia.com"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_ABSENT)
@pytest.mark.parametrize("filename", ["nvidia-dra-gpu-test1-v1.yaml", "nvidia-dra-gpu-test5-ts-mps.yaml",
                                      "nvidia-dra-bats-gpu-simple-mig-ts.yaml", "nvidia-dra-bats-two-claims-one-pod.yaml"])
def test_nvidia_demo_claims_are_allowed_against_shadow_devices(webhook, filename):
    objects = [o for _l, o in read_objects(str(CORPUS / "dra-claims" / filename))
               if o.get("kind") in ("ResourceClaim", "ResourceClaimTemplate")]
    for obj in objects:
        resp = validate(webhook, obj)
        assert resp["allowed"], resp
        assert not any("never" in w or "no device" in w for w in resp.get("warnings") or []), resp


def test_an_impossible_claim_is_denied_with_the_request_named(webhook):
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "nine"},
             "spec": {"devices": {"requests": [{"name": "h100s", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "count": 9, "selectors": [{"cel": {"expression":
                     "device.attributes['gpu.nvidia.com'].productName.contains('H100')"}}]}}]}}}
    resp = validate(webhook, claim)
    assert not resp["allowed"] and "h100s" in resp["status"]["message"]
