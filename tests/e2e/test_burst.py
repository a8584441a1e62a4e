"""Issue 22: bursts of pods, as a Deployment scale-up or a Job with parallelism sends them, into
a namespace dra-bridge serves. Every pod comes back migrated, none with a template warning, with
the API server calling our /validate for the templates we create while our /mutate waits."""

from __future__ import annotations

import ssl
import time
import urllib.request

import pytest

from tests.e2e.burst import create_pods, quantile
from tests.e2e.conftest import wait_for

NAMESPACE = "burst"
CLIENTS = 16
PODS = 64
P99_BOUND_S = 3.0  # generous: the stall this guards against took ~8 s a pod
pytestmark = pytest.mark.timeout(600)


def legacy(name: str, container: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"burst": container}},
            "spec": {"containers": [{"name": container, "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def create_burst(cluster, container: str, pods: int = PODS, clients: int = CLIENTS) -> list[float]:
    """`pods` legacy pods of one shape from `clients` keep-alive clients at once; each answer is
    checked (migrated, no template warning) and its latency returned."""
    suffix = f"{int(time.time() * 1000) % 10**8}"
    burst = create_pods(cluster, NAMESPACE, [legacy(f"{container}-{suffix}-{i}", container) for i in range(pods)],
                        clients)
    failures = []
    for i, c in enumerate(burst.created):
        spec = c.pod.get("spec") or {}
        if c.status != 201:
            failures.append(f"{i}: {c.status} {c.pod}")
        elif not spec.get("resourceClaims") or "nvidia.com/gpu" in (spec["containers"][0]["resources"].get("limits")
                                                                     or {}):
            failures.append(f"{i}: admitted unmigrated: {c.warnings}")
        elif any("could not create" in w or "unmigrated" in w or "time limit" in w for w in c.warnings):
            failures.append(f"{i}: template warning: {c.warnings}")
    assert not failures, f"{len(failures)} of {pods} pods: {failures[:3]}"
    return burst.latencies


def delete_pods(cluster) -> None:
    cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=false")


def template_names(cluster) -> set[str]:
    items = cluster.json("resourceclaimtemplates", "-n", NAMESPACE)["items"]
    return {t["metadata"]["name"] for t in items}


def webhook_metric(webhook, name: str) -> float:
    context = ssl.create_default_context(cafile=webhook.bundle.ca_cert)
    with urllib.request.urlopen(f"https://127.0.0.1:{webhook.port}/metrics", context=context, timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


@pytest.fixture(scope="module")
def burst_namespace(cluster, webhook):
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": NAMESPACE, "labels": {"dra-bridge.io/migrate": "enabled"}}}])
    yield NAMESPACE
    # The deployment first (else its ReplicaSet makes new pods), then every pod; the GPUs their
    # claims hold must be free again before the next tests ask for them.
    # (No kubelet ends a bound pod: pods are force-deleted until none is left.)
    cluster.kubectl("delete", "deployments,replicasets", "--all", "-n", NAMESPACE, "--wait=false")

    def all_gone():
        delete_pods(cluster)
        return not cluster.json("pods,resourceclaims", "-n", NAMESPACE)["items"]

    wait_for(all_gone, 120, "burst pods and their claims gone", interval=2)


def test_bursts_of_new_and_cached_shapes_after_cache_misses_and_on_a_fresh_replica(cluster, webhook, burst_namespace):
    errors_before = webhook_metric(webhook, 'dra_bridge_migrations_total{result="template_error"}')
    figures = {}
    figures["new shape"] = create_burst(cluster, "burst-a")
    [template] = template_names(cluster)
    figures["cached shape"] = create_burst(cluster, "burst-a")
    assert template_names(cluster) == {template}

    # A cache miss as template GC makes one: no pod names the template, it is collected.
    delete_pods(cluster)
    wait_for(lambda: not template_names(cluster), 60, "the unreferenced template collected")
    figures["after GC"] = create_burst(cluster, "burst-a")
    assert template_names(cluster) == {template}

    # A fresh replica: it starts knowing nothing but what its first list of templates says.
    webhook.stop()
    webhook.start()
    figures["fresh replica"] = create_burst(cluster, "burst-a")
    assert webhook_metric(webhook, 'dra_bridge_migrations_total{result="template_error"}') == 0
    assert webhook_metric(webhook, "dra_bridge_template_ensure_calls_total") == 0  # known from the list
    # The same fresh replica, a new shape: one create for the whole burst.
    figures["fresh replica, new shape"] = create_burst(cluster, "burst-b")
    assert webhook_metric(webhook, "dra_bridge_template_ensure_calls_total") == 1
    assert webhook_metric(webhook, 'dra_bridge_unfinished_reviews_total') == 0
    log = (cluster.dir / "webhook.log").read_text()
    assert "ran past its time limit" not in log and "template ensure failed" not in log
    for phase, latencies in figures.items():
        print(f"{phase}: {len(latencies)} pods, median {quantile(latencies, 0.5) * 1000:.0f} ms, "
              f"p99 {quantile(latencies, 0.99) * 1000:.0f} ms")
        assert quantile(latencies, 0.99) < P99_BOUND_S, (phase, sorted(latencies)[-5:])
    assert errors_before == 0
    delete_pods(cluster)


def test_a_deployment_scaled_from_zero_to_32_comes_up_migrated(cluster, webhook, burst_namespace):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scale-up"},
                  "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "scale-up"}},
                           "template": {"metadata": {"labels": {"app": "scale-up"}},
                                        "spec": legacy("x", "scale-up")["spec"]}}}
    claims_validated = 'dra_bridge_admission_requests_total{endpoint="validate",kind="ResourceClaim"'
    validated_before = webhook_metric(webhook, claims_validated)
    cluster.apply([deployment], "-n", NAMESPACE)
    cluster.kubectl("scale", "deployment", "scale-up", "--replicas=32", "-n", NAMESPACE)

    def all_created():
        pods = cluster.json("pods", "-n", NAMESPACE, "-l", "app=scale-up")["items"]
        return pods if len(pods) == 32 else None

    pods = wait_for(all_created, 120, "32 pods created")
    unmigrated = [p["metadata"]["name"] for p in pods if not p["spec"].get("resourceClaims")]
    assert not unmigrated, unmigrated
    assert len({p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] for p in pods}) == 1

    def claims_stamped():
        pods = cluster.json("pods", "-n", NAMESPACE, "-l", "app=scale-up")["items"]
        return all((p.get("status") or {}).get("resourceClaimStatuses") for p in pods)

    wait_for(claims_stamped, 120, "the resourceclaim controller made each pod's claim")
    # Each claim the controller stamps from the template is judged like any claim (issue 45): a
    # claim rule must hold for them too (the controller retries a create the API server did not
    # finish under the burst, so a claim may be judged more than once).
    assert webhook_metric(webhook, claims_validated) >= validated_before + 32
