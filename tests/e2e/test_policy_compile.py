"""Issue 45: `dra-bridge policy compile` writes ValidatingAdmissionPolicies that a real API server
type-checks without a warning and enforces with no dra-bridge running at all (a control plane of
its own, nothing of ours installed): claim counts, classes, admin access, legacy asks on pods,
a pod's own device asks against maxDevicesPerPod."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import own_plane, wait_for

pytestmark = pytest.mark.timeout(600)
POLICY = {"rules": [
    {"name": "claims-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["team-a"], "kinds": ["ResourceClaim"]}, "maxDevicesPerClaim": 4,
     "allowedDeviceClasses": ["gpu.nvidia.com"], "exclude": {"users": ["system:admin-exempt"]}},
    {"name": "no-admin-access", "validationActions": ["Deny"], "allowAdminAccess": False, "match": {"kinds": ["ResourceClaim"]}},
    {"name": "no-legacy", "validationActions": ["Deny"], "match": {"namespaces": ["team-a"]}, "forbidLegacy": True, "maxDevicesPerPod": 4},
    {"name": "pods-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["team-c"], "kinds": ["Pod"]},
     "maxDevicesPerPod": 4}]}


def claim(name, request):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpus", **request}]}}}


@pytest.fixture(scope="module")
def bare(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "vap") as plane:
        yield plane


def create(plane, namespace, obj):
    return plane.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)


def refused(plane, namespace, obj, what):
    """The first check of each policy is polled: the API server loads each policy on its own."""
    probe = {**obj, "metadata": {"generateName": f"{obj['metadata']['name']}-"}}
    return wait_for(lambda: (r := create(plane, namespace, probe)).returncode != 0 and r, 60, what)


def test_compiled_rules_hold_with_no_dra_bridge_at_all(bare, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    compiled = subprocess.run([sys.executable, "-m", "app", "policy", "compile", "--policy", str(policy)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert compiled.returncode == 0, compiled.stderr
    assert "rule no-legacy: enforced by the API server: forbidLegacy, maxDevicesPerPod; webhook only: " \
        "maxDevicesPerPod: for the claims and templates a pod names" in compiled.stderr
    bare.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ("team-a", "team-b", "team-c")])
    bare.kubectl("apply", "-f", "-", input=compiled.stdout)
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(compiled.stdout)
             if d["kind"] == "ValidatingAdmissionPolicy"]
    # no-legacy and pods-max-4 on claims too: the claim the scheduler writes for a pod's extended resources
    assert sorted(names) == ["dra-bridge.claims-max-4.resourceclaims", "dra-bridge.no-admin-access.resourceclaims",
                             "dra-bridge.no-legacy.pods", "dra-bridge.no-legacy.resourceclaims",
                             "dra-bridge.pods-max-4.pods", "dra-bridge.pods-max-4.resourceclaims"]

    def checked():
        found = [bare.json("validatingadmissionpolicy", n).get("status", {}) for n in names]
        return found if all("typeChecking" in s for s in found) else None
    for status in wait_for(checked, 60, "the API server's type check of every policy"):
        assert not status["typeChecking"].get("expressionWarnings"), status

    eight = claim("eight", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}})
    denied = refused(bare, "team-a", eight, "claims-max-4 in force")
    assert "rule claims-max-4: the claim asks for more than 4 devices" in denied.stderr, denied.stderr
    assert "ValidatingAdmissionPolicy 'dra-bridge.claims-max-4.resourceclaims'" in denied.stderr
    split = claim("split", {"firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 8},
                                               {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 1}]})
    assert "more than 4 devices" in create(bare, "team-a", split).stderr
    other = claim("other", {"exactly": {"deviceClassName": "l4.nvidia.com", "count": 1}})
    assert "a DeviceClass that is not allowed (allowed: gpu.nvidia.com)" in create(bare, "team-a", other).stderr
    assert create(bare, "team-a", claim("four", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}})) \
        .returncode == 0
    assert create(bare, "team-b", eight).returncode == 0  # the rule matches team-a only
    admin = claim("admin", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1, "adminAccess": True}})
    bare.kubectl("label", "namespace", "team-b", "resource.kubernetes.io/admin-access=true")
    denied = refused(bare, "team-b", admin, "no-admin-access in force")
    assert "rule no-admin-access: admin access is not allowed here" in denied.stderr, denied.stderr
    legacy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy"}, "spec": {"containers": [
        {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    assert "rule no-legacy: legacy GPU requests are not allowed" in refused(bare, "team-a", legacy,
                                                                             "no-legacy in force").stderr
    assert create(bare, "team-b", legacy).returncode == 0
    # Issue 56: a pod's own device asks are counted with dra-bridge down (init containers too).
    def gpu_pod(name, limits, init=None):
        spec = {"containers": [{"name": "cuda", "image": "cuda", "resources": {"limits": limits}}]}
        if init:
            spec["initContainers"] = [{"name": "warm", "image": "cuda", "resources": {"limits": init}}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    six = refused(bare, "team-c", gpu_pod("six", {"nvidia.com/gpu": "6"}), "pods-max-4 in force")
    assert "rule pods-max-4: the pod asks for more than 4 devices" in six.stderr, six.stderr
    assert "more than 4 devices" in create(bare, "team-c", gpu_pod("split", {"nvidia.com/gpu": "3"},
                                                                   init={"nvidia.com/mig-1g.10gb": "2"})).stderr
    assert create(bare, "team-c", gpu_pod("two", {"nvidia.com/gpu": "2"})).returncode == 0
    implicit = create(bare, "team-c", gpu_pod("class", {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "6"}))
    assert implicit.returncode != 0  # refused by the rule, or the name itself where KEP-5004 is off
    assert "more than 4 devices" in implicit.stderr or "deviceclass.resource.kubernetes.io" in implicit.stderr, \
        implicit.stderr
    schedulers = {**claim("extended", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 6}}),
                  "metadata": {"name": "extended", "annotations": {
                      "resource.kubernetes.io/extended-resource-claim": "true"}}}
    denied = create(bare, "team-c", schedulers)
    assert "rule pods-max-4: the scheduler's claim for a pod's extended resources asks for more than 4" \
        in denied.stderr, denied.stderr
    assert create(bare, "team-c", {**schedulers, "metadata": {"name": "tenants"}}).returncode == 0  # not the scheduler's
    exempt = bare.kubectl("create", "-n", "team-a", "-f", "-", "--as=system:admin-exempt", "--as-group=system:masters",
                          input=json.dumps({**eight, "metadata": {"name": "exempt"}}), check=False)
    assert exempt.returncode == 0, exempt.stderr  # the rule's exclusion holds in the compiled policy too


def test_the_quota_policy_compile_writes_holds_a_namespace_total_under_concurrent_claims(bare, tmp_path):
    """Issue 56 item 6: ten one-GPU claims created at once under an "at most 8 in the namespace"
    rule: the webhook's count is best-effort, the quota `policy compile --quotas` writes is exact."""
    from concurrent.futures import ThreadPoolExecutor

    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"rules": [
        {"name": "team-q-max-8", "validationActions": ["Deny"], "match": {"namespaces": ["team-q"]},
         "allowedDeviceClasses": ["gpu.nvidia.com"], "maxDevicesPerNamespace": 8}]}))
    compiled = subprocess.run([sys.executable, "-m", "app", "policy", "compile", "--policy", str(policy), "--quotas"],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert compiled.returncode == 0 and "quota in team-q: exact: 8 devices of gpu.nvidia.com" in compiled.stderr
    bare.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-q"}}])
    bare.kubectl("apply", "-f", "-", input=compiled.stdout)
    key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    wait_for(lambda: (bare.json("resourcequota", "dra-bridge-team-q-max-8", "-n", "team-q").get("status") or {})
             .get("hard", {}).get(key) == "8", 60, "the quota controller taking the quota up")
    one = claim("one", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}})
    with ThreadPoolExecutor(10) as pool:
        made = list(pool.map(lambda i: create(bare, "team-q", {**one, "metadata": {"name": f"c{i}"}}), range(10)))
    admitted = [r for r in made if r.returncode == 0]
    refused = [r.stderr for r in made if r.returncode != 0]
    assert len(admitted) == 8 and all("exceeded quota" in e for e in refused), refused
