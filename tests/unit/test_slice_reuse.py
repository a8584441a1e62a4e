"""A full build of a live index takes what the build before derived from slices whose bytes
did not change: its result must be the index a cold build gives, for every reader, and the
snapshots readers hold must stay as they were."""

import random

import pytest

from app.common import pack, unpack
from app.dra.live import LiveIndex
from app.dra.slicecache import SliceCache
from tests.unit.test_live_index import CLASS, NODES, claim_of, make_slice, observable, verdicts

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


def build(raw: dict, nodes, rules, previous=None, decoded=False, claims=None):
    slices = [unpack(b) for b in raw.values()] if decoded else list(raw.values())
    held = [(k, unpack(b) if decoded else b) for k, b in (claims or {}).items()]
    return LiveIndex(iter(slices), {"gpu.nvidia.com": CLASS}, iter(held), nodes, taint_rules=rules,
                     previous=previous)


@pytest.mark.parametrize("seed", range(10))
def test_rebuilds_reusing_unchanged_slices_match_a_cold_build(seed):
    rng = random.Random(seed)
    raw = {f"s{i}": pack(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    nodes, rules, claims = dict(NODES), [], {}
    live = build(raw, nodes, rules)
    reused_any = False
    for step in range(30):
        action = rng.random()
        name = rng.choice(list(raw) + [f"s{rng.randint(0, 9)}", "shadow"])
        if action < 0.3:  # a reporter republishes; sometimes applied as one event
            node = f"n{rng.randint(0, 7)}"
            obj = shadow_slice(rng, name, node) if name == "shadow" else make_slice(rng, name, node)
            raw[name] = pack(obj)
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
        else:  # the scheduler allocates or frees devices; sometimes applied as one event
            keys = sorted({d.key for d in live.index.devices if d.key[1] in {
                unpack(b)["spec"]["pool"]["name"] for b in raw.values()}})
            key = f"ns/c{rng.randint(0, 4)}"
            if rng.random() < 0.3 or not keys:
                claims.pop(key, None)
            else:
                claims[key] = pack(claim_of(rng.sample(keys, min(len(keys), rng.randint(1, 2)))))
            if rng.random() < 0.5 and live.claim_changed(key, claims.get(key)) is not None:
                continue
        before, seen, verdict = live.index, observable(live.index), verdicts(live.index)
        kept = {d.key: d for d in before.devices}
        live = build(raw, nodes, rules, previous=live, claims=claims)
        cold = build(raw, nodes, rules, decoded=True, claims=claims)
        assert observable(live.index) == observable(cold.index), f"step {step}"
        assert verdicts(live.index) == verdicts(cold.index), f"step {step}"
        assert observable(before) == seen and verdicts(before) == verdict, "a reader's snapshot changed"
        reused = [d for d in live.index.devices if kept.get(d.key) is d]
        reused_any = reused_any or bool(reused)
        assert len(reused) <= live.build.cache.reused * 4  # make_slice: at most 4 devices a slice
    assert reused_any


def test_slices_a_changed_taint_rule_selects_are_derived_again_and_only_those():
    rng = random.Random(3)
    raw = {f"s{i}": pack(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    first = build(raw, NODES, [])
    again = build(raw, NODES, [], previous=first)
    assert again.build.cache.reused == len(raw)
    before = {d.key: d for d in again.index.devices}
    one_pool = build(raw, NODES, [pool_rule("n1")], previous=again)
    assert one_pool.build.cache.reused == len(raw) - 1
    # s1's devices, derived again with the taint, share their keys and identities with before's
    derived_again = [d for d in one_pool.index.devices if d.key[1] == "n1"]
    assert derived_again and all(before[d.key] is not d and before[d.key].key is d.key
                                 and before[d.key].identity is d.identity for d in derived_again)
    assert build(raw, NODES, [pool_rule("n1")], previous=one_pool).build.cache.reused == len(raw)
    empty = sum(1 for b in raw.values() if not unpack(b)["spec"]["devices"])  # no device to select
    everywhere = build(raw, NODES, [pool_rule("n1"), EVERY_DEVICE], previous=one_pool)
    assert everywhere.build.cache.reused == empty
    assert build(raw, NODES, [EVERY_DEVICE], previous=everywhere).build.cache.reused == len(raw) - 1


def test_a_table_mostly_stale_starts_afresh():
    rng = random.Random(3)
    raw = {f"s{i}": pack(make_slice(rng, f"s{i}", f"n{i}")) for i in range(5)}
    cache = build(raw, NODES, []).build.cache
    assert SliceCache.after(cache, []).table is cache.table
    for i in range(300):  # shapes nobody holds any more pile up in the shared table
        cache.table.shapes.append({"attributes": {}, "stale": i})
    assert SliceCache.after(cache, []).table is not cache.table


def test_a_slice_changed_by_one_event_is_derived_again_at_the_next_build():
    rng = random.Random(5)
    raw = {f"s{i}": pack(make_slice(rng, f"s{i}", f"n{i}")) for i in range(3)}
    live = build(raw, NODES, [])
    raw["s1"] = pack(make_slice(rng, "s1", "n1"))
    assert live.slice_changed("s1", raw["s1"]) is not None
    assert set(live.build.cache.entries) == set(raw.values())  # the old bytes were let go
    assert live.slice_changed("s2", None) is not None
    del raw["s2"]
    assert set(live.build.cache.entries) == set(raw.values())  # and a deleted slice's
    again = build(raw, NODES, [], previous=live)
    assert again.build.cache.reused == 2


def test_claims_unchanged_since_the_build_before_keep_their_results():
    rng = random.Random(9)
    raw = {f"s{i}": pack(make_slice(rng, f"s{i}", f"n{i}")) for i in range(4)}
    keys = [("gpu.nvidia.com", unpack(b)["spec"]["pool"]["name"], d["name"])
            for b in raw.values() for d in unpack(b)["spec"]["devices"]]
    claims = {f"ns/c{i}": pack(claim_of([k])) for i, k in enumerate(keys[:3])}
    first = build(raw, NODES, [], claims=claims)
    held = dict(first.claims)
    claims["ns/c0"] = pack(claim_of(keys[3:5]))
    again = build(raw, NODES, [], previous=first, claims=claims)
    assert again.claims["ns/c1"] is held["ns/c1"] and again.claims["ns/c2"] is held["ns/c2"]
    assert again.claims["ns/c0"] is not held["ns/c0"] and again.index.allocated == set(keys[1:5])
