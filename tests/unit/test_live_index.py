"""Issue 12: the index updated event by event must be the index a full build gives, for every
reader: views, node groups, shapes, pool states, verdicts."""

import random

import orjson
import pytest

from app import dra
from app.dra.live import LiveIndex

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
NODES = {f"n{i}": {"zone": "a" if i % 2 else "b"} for i in range(6)}
CLAIMS = [
    {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]},
    {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 3}}]},
    {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].model == 'H100'"}}]}}],
     "constraints": [{"matchAttribute": "gpu.nvidia.com/model"}]},
    {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]},
]


def make_slice(rng, name, node, part=0, parts=1, generation=1):
    devices = []
    for i in range(rng.randint(0, 4)):
        device = {"name": f"{name}-gpu-{i}", "attributes": {"model": {"string": rng.choice(["H100", "A100"])},
                                                          "uuid": {"string": f"{name}-{i}"}},
                  "capacity": {"memory": {"value": rng.choice(["40Gi", "80Gi"])}}}
        if rng.random() < 0.1:
            device["attributes"]["bad"] = {"nonsense": 1}  # rejected, not fatal
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": parts}}}


def claim_of(keys, shared=False):
    results = [{"request": "g", "driver": d, "pool": p, "device": n} for d, p, n in keys]
    return {"status": {"allocation": {"devices": {"results": results}}}}


def observable(index):
    shape_of = {}
    for shape, members in enumerate(index.shape_members):
        text = orjson.dumps([index.shapes[shape], index.shape_taints[shape]], option=orjson.OPT_SORT_KEYS)
        for p in members:
            shape_of[index.devices[p].key] = text
    views = {}
    for node, view in index.views.items():
        views[node] = [(pool.key, pool.status, pool.reason, pool.local, pool.binding,
                        tuple(index.devices[p].key for p in pool.devices),
                        None if pool.selectable is None else sorted(index.devices[p].key for p in pool.selectable),
                        sorted((k, sorted(v.items())) for k, v in pool.counters.items()),
                        sorted((k, sorted(v.items())) for k, v in pool.allocated_use.items())) for pool in view]
    groups = [sorted(nodes) for nodes in index.node_groups.values()]
    return {"views": views, "groups": groups, "first": [g[0] for g in groups], "shapes": shape_of,
            "rejected": sorted(map(repr, index.rejected)), "incomplete": sorted(index.incomplete_pools),
            "invalid": sorted(index.invalid_pools.items()), "allocated": sorted(index.allocated)}


def verdicts(index):
    return [(v.status, v.message) for v in (dra.check(dra.parse_claim_spec(c), index) for c in CLAIMS)]


@pytest.mark.parametrize("seed", range(12))
def test_incremental_updates_match_a_full_build(seed):
    rng = random.Random(seed)
    slices = {}
    for i in range(5):
        slices[f"s{i}"] = make_slice(rng, f"s{i}", f"n{i}")
    claims: dict[str, dict] = {}
    live = LiveIndex(iter(list(slices.values())), {"gpu.nvidia.com": CLASS}, {}, NODES)
    for step in range(40):
        action = rng.random()
        if action < 0.45:  # a reporter republishes, or a new node's slice appears
            name = rng.choice(list(slices) + [f"s{rng.randint(0, 9)}"])
            node = f"n{rng.randint(0, 7)}" if name not in slices else slices[name]["spec"]["nodeName"]
            parts = rng.choice([1, 1, 1, 2])
            slices[name] = make_slice(rng, name, node, parts=parts, generation=rng.randint(1, 2))
            snapshot = live.slice_changed(name, slices[name])
        elif action < 0.6 and slices:
            name = rng.choice(list(slices))
            del slices[name]
            snapshot = live.slice_changed(name, None)
        else:  # the scheduler allocates or frees devices
            keys = [("gpu.nvidia.com", s["spec"]["pool"]["name"], d["name"]) for s in slices.values()
                    for d in s["spec"]["devices"]]
            key = f"ns/c{rng.randint(0, 5)}"
            if rng.random() < 0.3 or not keys:
                claims.pop(key, None)
                snapshot = live.claim_changed(key, None)
            else:
                claims[key] = claim_of(rng.sample(keys, min(len(keys), rng.randint(1, 2))))
                snapshot = live.claim_changed(key, claims[key])
        if snapshot is None:
            snapshot = live.rebuild(iter(list(slices.values())))
        full = dra.build_from_api(iter(list(slices.values())), {"gpu.nvidia.com": CLASS}, list(claims.values()),
                                  [{"metadata": {"name": n, "labels": labels}} for n, labels in NODES.items()])
        assert observable(snapshot) == observable(full), f"step {step}"
        assert verdicts(snapshot) == verdicts(full), f"step {step}"


def test_readers_keep_their_snapshot():
    rng = random.Random(7)
    slices = {f"s{i}": make_slice(rng, f"s{i}", f"n{i}") for i in range(4)}
    live = LiveIndex(iter(list(slices.values())), {"gpu.nvidia.com": CLASS}, {}, NODES)
    before = live.index
    seen = observable(before)
    verdict = verdicts(before)
    for i in range(10):
        live.slice_changed("s1", make_slice(rng, "s1", "n1"))
        live.slice_changed(f"new{i}", make_slice(rng, f"new{i}", "n5"))
    assert live.index is not before
    assert observable(before) == seen and verdicts(before) == verdict
