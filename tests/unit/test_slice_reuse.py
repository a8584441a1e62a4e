"""A full build of a live index takes what the build before derived from slices whose bytes
did not change: its result must be the index a cold build gives, for every reader, and the
snapshots readers hold must stay as they were."""

import random

import orjson
import pytest

from app.dra.live import LiveIndex
from app.dra.slicecache import SliceCache
from tests.unit.test_live_index import CLASS, NODES, make_slice, observable, verdicts

SHADOW = {"dra-bridge.io/shadow-of": "gpu.nvidia.com"}
TAINT = {"key": "maintenance", "effect": "NoSchedule"}
EVERY_DEVICE = {"spec": {"deviceSelector": {}, "taint": TAINT}}


def pool_rule(pool):
    return {"spec": {"deviceSelector": {"pool": pool}, "taint": TAINT}}


def shadow_slice(rng, name, node):
    s = make_slice(rng, name, node)
    s["metadata"]["labels"] = dict(SHADOW)
    s["spec"]["driver"] = "shadow.gpu.dra-bridge.io"
    for device in s["spec"]["devices"]:
        device["attributes"] = {f"gpu.nvidia.com/{k}": v for k, v in device["attributes"].items()}
    return s


def build(raw: dict, nodes, rules, previous=None, decoded=False):
    slices = [orjson.loads(b) for b in raw.values()] if decoded else list(raw.values())
    return LiveIndex(iter(slices), {"gpu.nvidia.com": CLASS}, {}, nodes, taint_rules=rules, previous=previous)


@pytest.mark.parametrize("seed", range(10))
def test_rebuilds_reusing_unchanged_slices_match_a_cold_build(seed):
    rng = random.Random(seed)
    raw = {f"s{i}": orjson.dumps(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    nodes, rules = dict(NODES), []
    live = build(raw, nodes, rules)
    reused_any = False
    for step in range(30):
        action = rng.random()
        name = rng.choice(list(raw) + [f"s{rng.randint(0, 9)}", "shadow"])
        if action < 0.3:  # a reporter republishes; sometimes applied as one event
            node = f"n{rng.randint(0, 7)}"
            obj = shadow_slice(rng, name, node) if name == "shadow" else make_slice(rng, name, node)
            raw[name] = orjson.dumps(obj)
            if rng.random() < 0.5 and live.slice_changed(name, raw[name]) is not None:
                continue
        elif action < 0.4 and raw:
            gone = rng.choice(list(raw))
            del raw[gone]
            if rng.random() < 0.5 and live.slice_changed(gone, None) is not None:
                continue
        elif action < 0.5:  # an admin adds or removes a DeviceTaintRule
            rule = rng.choice([EVERY_DEVICE, pool_rule(f"n{rng.randint(0, 7)}")])
            rules = [r for r in rules if r != rule] if rule in rules else rules + [rule]
        elif action < 0.7:  # a Node label flips: a full build
            node = rng.choice(list(nodes))
            nodes = {**nodes, node: {**nodes[node], "zone": rng.choice("abc")}}
        before, seen, verdict = live.index, observable(live.index), verdicts(live.index)
        kept = {d.key: d for d in before.devices}
        live = build(raw, nodes, rules, previous=live)
        cold = build(raw, nodes, rules, decoded=True)
        assert observable(live.index) == observable(cold.index), f"step {step}"
        assert verdicts(live.index) == verdicts(cold.index), f"step {step}"
        assert observable(before) == seen and verdicts(before) == verdict, "a reader's snapshot changed"
        reused = [d for d in live.index.devices if kept.get(d.key) is d]
        reused_any = reused_any or bool(reused)
        assert len(reused) <= live.build.cache.reused * 4  # make_slice: at most 4 devices a slice
    assert reused_any


def test_slices_a_changed_taint_rule_selects_are_derived_again_and_only_those():
    rng = random.Random(3)
    raw = {f"s{i}": orjson.dumps(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    first = build(raw, NODES, [])
    again = build(raw, NODES, [], previous=first)
    assert again.build.cache.reused == len(raw)
    one_pool = build(raw, NODES, [pool_rule("n1")], previous=again)
    assert one_pool.build.cache.reused == len(raw) - 1
    assert build(raw, NODES, [pool_rule("n1")], previous=one_pool).build.cache.reused == len(raw)
    empty = sum(1 for b in raw.values() if not orjson.loads(b)["spec"]["devices"])  # no device to select
    everywhere = build(raw, NODES, [pool_rule("n1"), EVERY_DEVICE], previous=one_pool)
    assert everywhere.build.cache.reused == empty
    assert build(raw, NODES, [EVERY_DEVICE], previous=everywhere).build.cache.reused == len(raw) - 1


def test_a_table_mostly_stale_starts_afresh():
    rng = random.Random(3)
    raw = {f"s{i}": orjson.dumps(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    cache = build(raw, NODES, []).build.cache
    assert SliceCache.after(cache, []).table is cache.table
    for i in range(300):  # shapes nobody holds any more pile up in the shared table
        cache.table.shapes.append({"attributes": {}, "stale": i})
    assert SliceCache.after(cache, []).table is not cache.table


def test_a_slice_changed_by_one_event_is_derived_again_at_the_next_build():
    rng = random.Random(5)
    raw = {f"s{i}": orjson.dumps(make_slice(rng, f"s{i}", f"n{i}")) for i in range(3)}
    live = build(raw, NODES, [])
    raw["s1"] = orjson.dumps(make_slice(rng, "s1", "n1"))
    assert live.slice_changed("s1", raw["s1"]) is not None
    assert set(live.build.cache.entries) == set(raw.values())  # the old bytes were let go
    assert live.slice_changed("s2", None) is not None
    del raw["s2"]
    assert set(live.build.cache.entries) == set(raw.values())  # and a deleted slice's
    again = build(raw, NODES, [], previous=live)
    assert again.build.cache.reused == 2
