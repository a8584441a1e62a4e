"""Each Kubernetes release from 1.34 to 1.38: its DRA gates, the fields it keeps, and what we
write and judge there (issue 54)."""

import subprocess
import sys

import pytest
import yaml

from app import dra
from app.common import release as releases
from app.dra import Inventory
from app.reporter import node_from_description, render
from tests.conftest import ROOT

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'd.example.com'"}}]}}


def at(version: str) -> releases.Release:
    return releases.parse(version, "test")


def slice_(node, devices, count=1, **spec):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-s"},
            "spec": {"driver": "d.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}, "devices": devices, **spec}}


def judged(version, slices, request, classes=None):
    inventory, _said = dra.as_kept_by(Inventory(slices=slices, classes=classes or {"gpu": CLASS}), at(version))
    spec = dra.parse_claim_spec({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", **request}}]}})
    return dra.check(spec, dra.build_index(inventory))


# -- the releases -------------------------------------------------------------------------
@pytest.mark.parametrize("text, version, minor", [
    ("1.34", "1.34", 34), ("v1.34.4", "1.34.4", 34), ("v1.35.4-gke.1200", "1.35.4", 35),
    ("v1.36.3+k3s1", "1.36.3", 36), ("1.38.0-beta.0", "1.38.0-beta.0", 38), ("v1.41.0", "1.41.0", 38)])
def test_versions_as_servers_and_flags_spell_them(text, version, minor):
    release = at(text)
    assert (release.version, release.minor) == (version, minor)
    assert ("newer than 1.38" in release.source) == (text == "v1.41.0")


@pytest.mark.parametrize("text", ["1.33", "v1.32.1", "2.0", "latest", ""])
def test_releases_without_resource_v1_or_no_version_are_refused(text):
    with pytest.raises(releases.UnknownRelease):
        at(text)


def test_default_gates_are_upstreams_per_release():
    """From k8s.io/kubernetes pkg/features/kube_features.go at each release."""
    off_until_136 = {releases.DEVICE_TAINTS, releases.PARTITIONABLE, releases.CONSUMABLE_CAPACITY,
                     releases.EXTENDED_RESOURCE, releases.BINDING_CONDITIONS}
    on_from_134 = {releases.ADMIN_ACCESS, releases.PRIORITIZED_LIST, releases.DEVICE_STATUS}
    assert releases.default_gates(34) == on_from_134
    assert releases.default_gates(35) == on_from_134
    assert releases.default_gates(36) == on_from_134 | off_until_136
    assert releases.default_gates(37) == on_from_134 | off_until_136 | {
        releases.DEVICE_TAINT_RULES, releases.FRACTIONAL_CAPACITY}
    assert releases.default_gates(38) == releases.default_gates(37)


def test_a_gate_the_release_lacks_cannot_be_turned_on():
    with pytest.raises(releases.UnknownRelease, match="does not exist in Kubernetes 1.34"):
        at("1.34").with_gates({releases.DEVICE_TAINT_RULES: True}, "flag")
    on = at("1.34").with_gates({releases.DEVICE_TAINTS: True}, "--feature-gates")
    assert on.has(releases.DEVICE_TAINTS) and "--feature-gates" in on.describe()


def test_fields_a_release_drops_and_what_a_server_dropped():
    device = {"name": "a", "taints": [{"key": "x", "effect": "NoSchedule"}], "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "1Gi", "requestPolicy": {"default": "1Mi"}}}}
    sent = slice_("n1", [device])
    assert {str(x) for x in releases.unkept(sent, at("1.34"))} == {
        "spec.devices[0].taints (feature gate DRADeviceTaints)",
        "spec.devices[0].allowMultipleAllocations (feature gate DRAConsumableCapacity)",
        "spec.devices[0].capacity.memory.requestPolicy (feature gate DRAConsumableCapacity)"}
    assert releases.unkept(sent, at("1.36")) == []
    stored, lost = releases.strip(sent, at("1.34"))
    assert len(lost) == 3 and stored["spec"]["devices"][0] == {"name": "a", "capacity": {"memory": {"value": "1Gi"}}}
    assert sent["spec"]["devices"][0]["taints"]  # never changed in place
    assert [x.gate for x in releases.dropped(sent, stored)] == [releases.DEVICE_TAINTS, releases.CONSUMABLE_CAPACITY,
                                                                releases.CONSUMABLE_CAPACITY]
    assert releases.dropped(sent, sent) == []


# -- judging as the release would ---------------------------------------------------------
def test_a_tainted_gpu_is_allocatable_where_taints_are_dropped():
    """1.34 and 1.35 drop device taints: their scheduler hands out a GPU with a fatal XID."""
    xid = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    devices = [{"name": "a", "taints": [xid]}]
    assert judged("1.36", [slice_("n1", devices)], {}).status == "never"
    assert judged("1.34", [slice_("n1", devices)], {}).status == "satisfiable"


def test_incomplete_pools_serve_exact_counts_on_134_only():
    """Upstream's allocator: 1.34 takes exact-count devices from incomplete pools, 1.35+ does not."""
    incomplete = [slice_("n1", [{"name": "a"}], count=2)]
    assert judged("1.34", incomplete, {}).status == "satisfiable"
    assert judged("1.35", incomplete, {}).status == "unsatisfiable-now"
    assert judged("1.34", incomplete, {"allocationMode": "All"}).status != "satisfiable"


def test_allow_multiple_allocations_is_undefined_in_cel_before_136():
    devices = [{"name": "a", "allowMultipleAllocations": True}]
    selectors = {"selectors": [{"cel": {"expression": "device.allowMultipleAllocations"}}]}
    assert judged("1.36", [slice_("n1", devices)], selectors).status == "satisfiable"
    verdict = judged("1.35", [slice_("n1", devices)], selectors)
    assert verdict.status == "invalid" and "allowMultipleAllocations" in verdict.message


def test_counters_dropped_let_a_gpu_and_its_placements_go_at_once():
    """What 1.34.4 did to an A100 (issue 54): the whole GPU and two MIG placements all allocated."""
    desc = node_from_description(yaml.safe_load((ROOT / "app/data/fake/a100-mig.yaml").read_text()), "a100")
    partitioned = render.slices(desc, "n1", "gpu.nvidia.com", 1, partitionable=True, release=at("1.36"))
    classes = {"gpu.nvidia.com": {**CLASS, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}}
    kept_36 = dra.build_index(dra.as_kept_by(Inventory(slices=partitioned, classes=classes), at("1.36"))[0])
    kept_34 = dra.build_index(dra.as_kept_by(Inventory(slices=partitioned, classes=classes), at("1.34"))[0])
    attrs = "device.attributes['gpu.nvidia.com']"
    ours = "device.attributes['dra-bridge.io']"
    selected = {"whole": f"{attrs}.type == 'gpu' && {ours}.minor == 2",
                "big": f"{attrs}.type == 'mig' && {attrs}.profile == '7g.80gb' && {ours}.parentMinor == 2",
                "small": f"{attrs}.type == 'mig' && {attrs}.profile == '3g.40gb' && {ours}.parentMinor == 2"}
    spec = dra.parse_claim_spec({"devices": {"requests": [{"name": name, "exactly": {
        "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": expression}}]}}
        for name, expression in selected.items()]}})
    assert dra.check(spec, kept_36).status == "never"  # the counters: one GPU is one GPU
    assert dra.check(spec, kept_34).status == "satisfiable"  # one A100 handed out three times


# -- what we write for each release -------------------------------------------------------
def _unhealthy_a100():
    description = yaml.safe_load((ROOT / "app/data/fake/a100-mig.yaml").read_text())
    description["gpus"][1] = {**description["gpus"][1], "healthy": False, "xid": 79}
    return node_from_description(description, "a100")


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37", "1.38"])
def test_the_reporter_writes_only_what_each_release_keeps(version):
    node = _unhealthy_a100()
    out = render.slices(node, "n1", "gpu.nvidia.com", 1, shareable=True, partitionable=True, release=at(version))
    assert all(releases.unkept(s, at(version)) == [] for s in out)
    names = [d["name"] for s in out for d in s["spec"].get("devices") or []]
    gpu1 = [n for n in names if n.startswith("gpu-1")]
    if version in ("1.34", "1.35"):
        assert not gpu1  # its taint would be dropped: the failing GPU is left out
        assert not any("sharedCounters" in s["spec"] for s in out)
    else:
        assert gpu1 and any("taints" in d for s in out for d in s["spec"].get("devices") or [])
        assert any("sharedCounters" in s["spec"] for s in out)


def test_counters_beside_their_devices_on_134_apart_from_135():
    """1.34 (gate on) wants a device's counter set in its own slice; 1.35+ refuses both in one."""
    node = _unhealthy_a100()
    on_134 = at("1.34").with_gates({releases.PARTITIONABLE: True}, "test")
    together = render.slices(node, "n1", "gpu.nvidia.com", 1, partitionable=True, release=on_134)
    assert all("devices" in s["spec"] for s in together if "sharedCounters" in s["spec"])
    on_135 = at("1.35").with_gates({releases.PARTITIONABLE: True}, "test")
    apart = render.slices(node, "n1", "gpu.nvidia.com", 1, partitionable=True, release=on_135)
    assert not any("devices" in s["spec"] for s in apart if "sharedCounters" in s["spec"])


def run(*args):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_classes_and_one_budget_are_refused_where_extended_resources_are_dropped(tmp_path):
    refused = run("classes", "--inventory", "example", "--kube-version", "1.35")
    assert refused.returncode == 2 and "DRAExtendedResource is off" in refused.stderr
    assert "Kubernetes 1.35 (--kube-version)" in refused.stderr  # said what it judged against
    assert run("classes", "--inventory", "example", "--kube-version", "1.36").returncode == 0
    quota = tmp_path / "quota.yaml"
    quota.write_text("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
                     "spec: {hard: {requests.nvidia.com/gpu: '4'}}\n")
    one = run("quota", "-f", str(quota), "--budget", "one", "--kube-version", "1.34")
    assert one.returncode == 2 and "--budget one" in one.stderr and "on by default from 1.36" in one.stderr


def test_an_export_carries_its_release(tmp_path):
    inventory = (ROOT / "app/data/example-inventory.yaml").read_text()
    export = tmp_path / "export.yaml"
    export.write_text(inventory + "\n---\nserverVersion: {major: '1', minor: '35', gitVersion: v1.35.4}\n")
    said = run("classes", "--inventory", str(export))
    assert said.returncode == 2 and "Kubernetes 1.35.4 (the API server's /version)" in said.stderr
    other = run("classes", "--inventory", str(export), "--kube-version", "1.37")
    assert other.returncode == 2 and "--kube-version: 1.37, but the cluster runs 1.35.4" in other.stderr


def test_native_needs_extended_resources_and_the_reason_names_the_gate(tmp_path):
    inventory = tmp_path / "inv.yaml"
    classes = run("classes", "--inventory", "example").stdout
    inventory.write_text((ROOT / "app/data/example-inventory.yaml").read_text() + "\n---\n" + classes)
    pod = str(ROOT / "examples/workloads/gpu-pod.yaml")
    native = run("plan", "-f", pod, "--inventory", str(inventory), "-o", "report", "--kube-version", "1.37")
    assert "native" in native.stderr.splitlines()[-2]
    old = run("plan", "-f", pod, "--inventory", str(inventory), "-o", "report", "--kube-version", "1.35")
    assert "rewrite" in old.stderr.splitlines()[-2]
    assert "Kubernetes 1.35 drops from this inventory: 4 x DeviceClass spec.extendedResourceName " \
        "(DRAExtendedResource is off)" in old.stderr


def test_check_says_what_the_release_drops_from_a_claim(tmp_path):
    claim = tmp_path / "claim.yaml"
    claim.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec:\n"
                     "  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: gpu.nvidia.com\n"
                     "        capacity: {requests: {memory: 10Gi}}\n")
    old = run("check", "-f", str(claim), "--inventory", "example", "--kube-version", "1.34")
    assert "drops spec.devices.requests[0].exactly.capacity (feature gate DRAConsumableCapacity)" in old.stdout
    assert "drops" not in run("check", "-f", str(claim), "--inventory", "example").stdout


def test_audit_names_dra_objects_in_versions_no_release_serves_by_default(tmp_path):
    manifest = tmp_path / "chart.yaml"
    manifest.write_text("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata: {name: old}\n"
                        "spec: {spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.nvidia.com}]}}}\n")
    result = run("audit", "-f", str(manifest))
    assert result.returncode == 1
    assert "ResourceClaimTemplate/old (resource.k8s.io/v1beta1)" in result.stderr and "write resource.k8s.io/v1" \
        in result.stderr
    manifest.write_text(manifest.read_text().replace("v1beta1", "v1").replace(
        "{name: gpu, deviceClassName: gpu.nvidia.com}", "{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}"))
    assert run("audit", "-f", str(manifest)).returncode == 0


def test_a_hami_share_stays_on_the_device_plugin_where_consumable_capacity_is_dropped():
    """The webhook's one decision on a 1.35 cluster: the shareable slices lost
    allowMultipleAllocations at the API server, so the share stays on the device plugin, and the
    reason names the gate and the release that would move it (never a silent whole GPU)."""
    from app import application
    from app.policy import default_policy
    from tests.helpers import container, pod

    device = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}, "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi"}},
                           "dra-bridge.io/cores": {"value": "100"}}}
    nvidia = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
              "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    slices = [{**slice_("n1", [device]), "spec": {**slice_("n1", [device])["spec"], "driver": "gpu.nvidia.com"}}]
    share = pod([container("w", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})])
    policy = default_policy()
    outcomes = {}
    for version in ("1.35", "1.36"):
        inventory, _ = dra.as_kept_by(Inventory(slices=slices, classes={"gpu.nvidia.com": nvidia}), at(version))
        index = dra.build_index(inventory)
        # As the webhook builds them: path facts kept per index (ServiceState.path_facts), then the rest.
        path = application.index_facts(index, policy.migration, dra.TemplateVerdicts(index, "spec").dra)
        decision = application.decide_pod(share, "team-a", policy, application.cluster_facts(policy, index, path=path))
        outcomes[version] = (decision.outcome.value, decision.path.reason if decision.path else "")
    assert outcomes["1.36"][0] == "rewrite"
    path, reason = outcomes["1.35"]
    assert path == "legacy" and "DRAConsumableCapacity is off; on by default from 1.36" in reason, reason


@pytest.mark.parametrize("version, refused", [("1.34", False), ("1.35", True), ("1.36", False)])
def test_a_distinct_only_constraint_is_judged_as_each_api_server_stores_it(version, refused):
    """1.35 drops distinctAttribute (DRAConsumableCapacity off) and its API server then refuses the
    constraint left empty; 1.34 keeps the field, 1.36+ have the gate on (tests/e2e checks each)."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "d"},
             "spec": {"devices": {"requests": [{"name": "two", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                           "count": 2}}],
                                  "constraints": [{"requests": ["two"], "distinctAttribute": "gpu.nvidia.com/uuid"}]}}}
    stored, _lost = releases.strip(claim, releases.parse(version, "test"))
    if refused:
        with pytest.raises(dra.ClaimError, match=r"constraints\[0\].matchAttribute: Required value"):
            dra.parse_claim_object(stored)
    else:
        assert dra.parse_claim_object(stored).constraints
