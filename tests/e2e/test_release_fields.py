"""The release facts against a real API server of the release this run builds (`make e2e
KUBE_VERSION=1.34.4`, default 1.37.2): its /version, the gated fields it drops (each the gate
app/common/release.py says is off there, none other), what a dry run shows of its gates, and the
reporter writing only what it keeps (issue 54)."""

from __future__ import annotations

import json

from app.common import release as releases
from app.kube import api_client, probed_release, server_release
from tests.e2e.cluster import _release

ON_NODE = "cpu-0"


def _stored(cluster, obj: dict) -> dict:
    """What the API server stores of `obj`: a server-side dry run (nothing is kept)."""
    out = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj))
    return json.loads(out.stdout)


def _this_release():
    return releases.parse(_release(), "the e2e build")


def _gated_objects(minor: int) -> list[dict]:
    """One object per kind dra-bridge writes, holding every gated field it can carry there."""
    device = {"name": "probe-0", "taints": [{"key": "dra-bridge.io/probe", "effect": "NoSchedule"}],
              "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi",
                                                                          "validRange": {"min": "1Gi"}}}},
              "bindsToNode": True, "bindingConditions": ["dra-bridge.io/ready"],
              "bindingFailureConditions": ["dra-bridge.io/failed"]}
    pool = {"name": "release-probe", "generation": 1, "resourceSliceCount": 1}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "release-probe"},
              "spec": {"driver": "probe.dra-bridge.io", "nodeName": ON_NODE, "pool": pool, "devices": [device]}}
    # Counters in a slice of their own from 1.35, beside the devices that use them on 1.34.
    counters = {"sharedCounters": [{"name": "set", "counters": {"memory": {"value": "8Gi"}}}]}
    consumer = {"name": "part-0", "consumesCounters": [{"counterSet": "set", "counters": {"memory": {"value": "4Gi"}}}]}
    partition = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "release-parts"},
                 "spec": {"driver": "probe.dra-bridge.io", "nodeName": ON_NODE,
                          "pool": {**pool, "name": "release-parts"}, "devices": [consumer],
                          **(counters if minor < 35 else {})}}
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "release-probe"},
                    "spec": {"extendedResourceName": "dra-bridge.io/release-probe"}}
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "release-probe", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "exact", "exactly": {"deviceClassName": "gpu.nvidia.com", "capacity": {
                        "requests": {"memory": "1Gi"}},
                        "tolerations": [{"key": "dra-bridge.io/probe", "operator": "Exists"}]}},
                    {"name": "either", "firstAvailable": [{"name": "one", "deviceClassName": "gpu.nvidia.com"}]}],
                    # 1.35 drops distinctAttribute and refuses a constraint left empty: a matchAttribute
                    # beside it there (test_a_distinct_only_constraint...: the refusal itself)
                    "constraints": [{"requests": ["exact"], "distinctAttribute": "gpu.nvidia.com/uuid",
                                     **({"matchAttribute": "gpu.nvidia.com/productName"} if minor == 35 else {})}]}}}}
    return [slice_, partition, device_class, template]


def test_the_api_server_says_its_release(cluster):
    release = server_release(api_client(cluster.admin_kubeconfig, True))
    assert release.version == _release().removeprefix("v")
    assert release.source == "the API server's /version"


def test_it_drops_exactly_the_fields_of_the_gates_its_release_has_off(cluster):
    """Where app/common/release.py and the real API server disagree about one gated field, or a
    field is dropped whose gate we believe on, the table is wrong for this release."""
    release = _this_release()
    for obj in _gated_objects(release.minor):
        stored = _stored(cluster, obj)
        lost = {(x.path, x.gate) for x in releases.dropped(obj, stored)}
        expected = {(x.path, x.gate) for x in releases.unkept(obj, release)}
        assert lost == expected, f"{obj['kind']} on Kubernetes {release.version}: dropped {sorted(lost)}, " \
                                 f"expected {sorted(expected)}"


def test_a_dry_run_probe_finds_the_release_defaults(cluster):
    release, unprobed = probed_release(api_client(cluster.admin_kubeconfig, True))
    assert unprobed == []
    assert release.gates == releases.default_gates(release.minor), release.source


def test_the_reporter_writes_only_what_the_release_keeps(cluster):
    """Every slice our reporter published in this cluster (the session's GPU nodes) holds nothing
    the release would drop: what it holds is what it sent."""
    release = _this_release()
    listed = json.loads(cluster.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    ours = [s for s in listed if s["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "dra-bridge"]
    assert ours
    for s in ours:
        assert releases.unkept({"kind": "ResourceSlice", **s}, release) == []
    tainted = [d for s in ours for d in s["spec"].get("devices") or [] if d.get("taints")]
    # gb200x4's GPU 3 has a fatal XID: tainted where taints are kept, left out where they are not.
    assert bool(tainted) == release.has(releases.DEVICE_TAINTS)


def test_the_slices_the_reporter_renders_come_back_as_written(cluster):
    """What render.slices writes for this release (a failing GPU, --shareable, --partitionable on
    an A100 with MIG profiles), created as a server-side dry run: stored with every field it sent."""
    import yaml

    from app.reporter import node_from_description, render
    from tests.conftest import ROOT

    description = yaml.safe_load((ROOT / "app/data/fake/a100-mig.yaml").read_text())
    description["gpus"][3] = {**description["gpus"][3], "healthy": False, "xid": 79}
    node = node_from_description(description, "a100")
    release = _this_release()
    for sent in render.slices(node, ON_NODE, "roundtrip.dra-bridge.io", 1, shareable=True, partitionable=True,
                              release=release):
        stored = _stored(cluster, sent)
        assert releases.dropped(sent, stored) == [], (release.version, sent["metadata"]["name"])
        assert stored["spec"].get("sharedCounters") == sent["spec"].get("sharedCounters")
        assert [d["name"] for d in stored["spec"].get("devices") or []] == \
            [d["name"] for d in sent["spec"].get("devices") or []]


def test_a_distinct_only_constraint_is_refused_or_kept_as_we_judge_it(cluster):
    """1.34 keeps distinctAttribute, 1.36+ have its gate on; 1.35 drops it and then refuses the
    constraint left empty (matchAttribute: Required value). `check` judges the claim as stored."""
    from app import dra

    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "distinct-only", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "two", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                           "count": 2}}],
                                  "constraints": [{"requests": ["two"], "distinctAttribute": "gpu.nvidia.com/uuid"}]}}}
    server = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(claim),
                             check=False)
    stored, _lost = releases.strip(claim, _this_release())
    try:
        dra.parse_claim_object(stored)
        ours = None
    except dra.ClaimError as exc:
        ours = str(exc)
    assert (server.returncode != 0) == (ours is not None), (server.stderr, ours)
    if ours is not None:
        assert "constraints[0].matchAttribute: Required value" in server.stderr and "matchAttribute" in ours
