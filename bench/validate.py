"""Feasibility of claims against 100,000 devices on 12,500 nodes.

Two inventories: `uniform` (three node kinds from the reporter's fake GPUs) and
`heterogeneous` (racks with their own NVLink clique and driver version: hundreds of device
shapes; health taints, MIG partitions drawing on shared counters, GPUs shared through
consumable capacity, a third of the devices allocated, Node objects with labels).
Prints index build time and RSS, the median and p99 of `dra.check` for a satisfiable claim and
an impossible one, and the same selectors evaluated naively per device (measured on a sample,
scaled to the inventory) in the same run, with the ratio.
Usage: python bench/validate.py [--inventory uniform|heterogeneous] [--nodes 12500] [--runs 200]
"""

import argparse
import dataclasses
import gc
import pathlib
import random
import subprocess
import tempfile
import resource
import statistics
import sys
import time
import tracemalloc

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import dra  # noqa: E402
from app.cli import load_inventory  # noqa: E402
from app.common import parse_quantity  # noqa: E402
from app.dra import Inventory, cel  # noqa: E402
from app.reporter import node_from_description, render  # noqa: E402

CLAIM = {"devices": {"requests": [
    {"name": "trainer", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4, "selectors": [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')"}}]}},
    {"name": "big-memory", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [
        {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0"}}]}},
    {"name": "hopper", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1, "selectors": [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
                               ".isGreaterThan(semver('8.9.0'))"}}]}},
]}}


def peak_rss_mb(reset: bool = False, pid: int | str = "self") -> float:
    """The most RSS a process (this one by default) held since it started or the last reset (the
    kernel's VmHWM: every moment, not a sample); reset starts a new window (another process's:
    as root). OSError when the process is gone."""
    with open(f"/proc/{pid}/status") as handle:
        peak = next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmHWM:"))
    if reset:
        with open(f"/proc/{pid}/clear_refs", "w") as handle:
            handle.write("5")
    return peak


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def inventory(nodes: int) -> Inventory:
    fakes = {name: node_from_description(yaml.safe_load((ROOT / "app/data/fake" / f"{name}.yaml").read_text()), name)
             for name in ("h100x8", "a100-mig", "l4x4")}
    l4x8 = dataclasses.replace(fakes["l4x4"], gpus=tuple(
        dataclasses.replace(fakes["l4x4"].gpus[i % 4], index=i, uuid=f"GPU-l4-{i}") for i in range(8)))
    a100 = dataclasses.replace(fakes["a100-mig"], gpus=tuple(
        dataclasses.replace(g, mig_enabled=False, mig_devices=()) for g in fakes["a100-mig"].gpus))
    # 8 devices a node: 100,000 devices on 12,500 nodes.
    kinds = [("h100x8", fakes["h100x8"])] * 2 + [("a100", a100), ("l4x8", l4x8)]
    slices = []
    for n in range(nodes):
        _kind, desc = kinds[n % len(kinds)]
        unique = dataclasses.replace(desc, gpus=tuple(dataclasses.replace(
            g, uuid=f"{g.uuid[:-6]}{n:06d}") for g in desc.gpus))
        slices.extend(render.slices(unique, f"node-{n:05d}", "gpu.nvidia.com", 1))
    return Inventory(slices=slices, classes=load_inventory(None).classes)


PRODUCTS = (("NVIDIA H100 80GB HBM3", "80Gi", "9.0.0"), ("NVIDIA H200", "141Gi", "9.0.0"),
            ("NVIDIA A100-SXM4-40GB", "40Gi", "8.0.0"), ("NVIDIA L4", "24Gi", "8.9.0"))
DRIVERS = ("550.54.15", "550.90.07", "560.35.03", "570.86.10", "575.51.03")


def _gpu(name, product, memory, cc, driver, clique, taint, shared):
    device = {"name": name, "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": product},
        "driverVersion": {"version": driver.split(".")[0] + "." + driver.split(".")[1] + ".0"},
        "cudaComputeCapability": {"version": cc}, "cliqueId": {"string": clique},
        "uuid": {"string": f"GPU-{name}"}, "index": {"int": int(name.rsplit("-", 1)[1])}},
        "capacity": {"memory": {"value": memory}}}
    if taint:
        device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    if shared:
        device["allowMultipleAllocations"] = True
        device["capacity"]["memory"]["requestPolicy"] = {"default": "8Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    return device


def heterogeneous(nodes: int, seed: int = 7) -> tuple[Inventory, set, dict, set]:
    """Racks of 18 nodes; per rack a product, driver version and NVLink clique; some racks MIG
    (a full GPU and seven 1g partitions drawing on one counter set) or shared GPUs."""
    rng = random.Random(seed)
    slices, labels, allocated, capacity, shared = [], {}, set(), {}, set()
    for n in range(nodes):
        rack = n // 18
        product, memory, cc = PRODUCTS[rack % len(PRODUCTS)]
        driver = DRIVERS[(rack // len(PRODUCTS)) % len(DRIVERS)]
        node = f"node-{n:05d}"
        kind = ("mig" if rack % 7 == 3 else "shared" if rack % 7 == 5 else "whole")
        labels[node] = {"rack": f"rack-{rack}", "kind": kind, "nvidia.com/gpu.product": product.replace(" ", "-")}
        devices, counters = [], None
        if kind == "mig":
            counters = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}, "slices": {"value": "7"}}}]
            whole = _gpu(f"{node}-gpu-0", "NVIDIA A100-SXM4-40GB", "40Gi", "8.0.0", driver, f"clique-{rack}",
                         False, False)
            whole["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {
                "memory": {"value": "40Gi"}, "slices": {"value": "7"}}}]
            devices.append(whole)
            for i in range(7):
                devices.append({"name": f"{node}-mig-1g-{i}", "attributes": {
                    "type": {"string": "mig"}, "profile": {"string": "1g.5gb"}, "productName": {"string": product},
                    "driverVersion": {"version": driver.split(".")[0] + ".0.0"},
                    "cliqueId": {"string": f"clique-{rack}"},
                    "uuid": {"string": f"MIG-{node}-{i}"}}, "capacity": {"memory": {"value": "5Gi"}},
                    "consumesCounters": [{"counterSet": "gpu-0", "counters": {
                        "memory": {"value": "5Gi"}, "slices": {"value": "1"}}}]})
        else:
            for i in range(8):
                devices.append(_gpu(f"{node}-gpu-{i}", product, memory, cc, driver, f"clique-{rack}",
                                    rng.random() < 0.01, kind == "shared"))
        for d in devices:
            key = ("gpu.nvidia.com", node, d["name"])
            roll = rng.random()
            if kind == "shared" and roll < 0.5:
                shared.add(key)
                capacity[key] = {"memory": parse_quantity(f"{rng.randint(1, 4) * 8}Gi")}
            elif kind != "shared" and roll < 0.33:
                allocated.add(key)
        spec = {"driver": "gpu.nvidia.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 2 if counters else 1},
                "devices": devices}
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                       "metadata": {"name": f"{node}-gpu"}, "spec": spec})
        if counters:
            slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                           "metadata": {"name": f"{node}-counters"},
                           "spec": {**{k: v for k, v in spec.items() if k != "devices"}, "sharedCounters": counters}})
    inv = Inventory(slices=slices, classes=load_inventory(None).classes, nodes=labels)
    return inv, allocated, capacity, shared


IMPOSSIBLE = {"devices": {"requests": [{"name": "huge", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 9,
    "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.contains('H100')"}}]}}]}}


def timed(spec, ix, runs, cold):
    out = []
    verdict = None
    for _ in range(runs):
        if cold:
            ix.selector_cache.clear()  # as for a claim whose selectors this index has not seen
        t = time.perf_counter()
        verdict = dra.check(spec, ix)
        out.append(time.perf_counter() - t)
    return out, verdict


def allocation_results(allocated: set, capacity: dict, shared: set) -> dict[str, list]:
    """Pool -> the allocation results claims hold there (one claim per node's pool)."""
    claims: dict[str, list] = {}
    for driver, pool, device in sorted(allocated | shared):
        result = {"request": "r", "driver": driver, "pool": pool, "device": device}
        if (driver, pool, device) in capacity:
            result |= {"shareID": f"s-{device}", "consumedCapacity": {
                k: str(v) for k, v in capacity[(driver, pool, device)].items()}}
        claims.setdefault(pool, []).append(result)
    return claims


def live_mode_rss(inv: Inventory, allocated: set, capacity: dict, shared: set) -> str:
    """The webhook's memory in live mode at this size: a child process holds the objects as the
    live inventory does (JSON bytes per object) and builds the index from them as it does."""
    import orjson

    claims = allocation_results(allocated, capacity, shared)
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as handle:
        for s in inv.slices:
            handle.write(b"S" + orjson.dumps(s) + b"\n")
        for c in inv.classes.values():
            handle.write(b"C" + orjson.dumps(c) + b"\n")
        for pool, results in claims.items():
            handle.write(b"R" + orjson.dumps({"metadata": {"name": f"claim-{pool}", "namespace": "default"},
                                              "status": {"allocation": {"devices": {"results": results}}}}) + b"\n")
        for name, labels in (inv.nodes or {}).items():
            handle.write(b"N" + orjson.dumps({"metadata": {"name": name, "labels": labels}}) + b"\n")
    child = subprocess.run([sys.executable, __file__, "--live-child", handle.name], capture_output=True, text=True,
                           check=True)
    pathlib.Path(handle.name).unlink()
    return child.stdout.strip()


def live_child(path: str) -> None:
    import orjson

    start = rss_mb()
    held: dict[bytes, list[bytes]] = {b"S": [], b"C": [], b"R": [], b"N": []}
    with open(path, "rb") as handle:
        for line in handle:
            held[line[:1]].append(line[1:].rstrip(b"\n"))
    stored = rss_mb()
    started = time.perf_counter()
    classes = {c["metadata"]["name"]: c for c in map(orjson.loads, held[b"C"])}
    claims = {str(i): orjson.loads(b) for i, b in enumerate(held[b"R"])}
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in map(orjson.loads, held[b"N"])}
    ix = dra.LiveIndex((orjson.loads(b) for b in held[b"S"]), classes, claims, nodes).index  # as --inventory live
    seconds = time.perf_counter() - started
    gc.collect()
    print(f"live mode (child process): {len(ix.devices)} devices, {sum(map(len, held.values()))} objects held as "
          f"JSON {sum(len(b) for v in held.values() for b in v) / 2**20:.0f} MB; RSS start {start:.0f} MB, objects "
          f"held {stored:.0f} MB, after index build {rss_mb():.0f} MB (build {seconds:.1f}s)")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def naive_per_device(ix: dra.Index, sample: int) -> float:
    """Seconds to evaluate class + request selectors on every device, from a sample."""
    exprs = [c["cel"]["expression"] for c in ix.classes["gpu.nvidia.com"]["spec"]["selectors"]]
    for req in CLAIM["devices"]["requests"]:
        exprs += [s["cel"]["expression"] for s in req["exactly"]["selectors"]]
    selectors = [cel.compile_selector(e) for e in exprs]
    step = max(1, len(ix.devices) // sample)
    picked = ix.devices[::step][:sample]
    started = time.perf_counter()
    for device in picked:
        variable = device.variable
        for sel in selectors:
            try:
                sel.matches(variable)
            except cel.CelError:
                pass  # a device without the attribute: evaluated all the same
    return (time.perf_counter() - started) / len(picked) * len(ix.devices)


def engine_comparison(ix: dra.Index, runs: int = 2000) -> None:
    """Why common-expression-language: the same selector on the same device in both engines."""
    expr = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    variable = ix.shapes[0]
    ours = cel.compile_selector(expr)
    started = time.perf_counter()
    for _ in range(runs):
        ours.matches(variable)
    ours_us = (time.perf_counter() - started) / runs * 1e6
    try:
        import celpy
    except ImportError:
        print(f"CEL engine: common-expression-language {ours_us:.1f} us/eval (cel-python not installed)")
        return
    env = celpy.Environment()
    program = env.program(env.compile(expr))
    activation = {"device": celpy.json_to_cel(variable)}
    started = time.perf_counter()
    for _ in range(runs // 10):
        program.evaluate(activation)
    theirs_us = (time.perf_counter() - started) / (runs // 10) * 1e6
    print(f"CEL engine per evaluation: common-expression-language {ours_us:.1f} us, cel-python {theirs_us:.1f} us "
          f"({theirs_us / ours_us:.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=12500)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--naive-sample", type=int, default=2000)
    parser.add_argument("--inventory", choices=("uniform", "heterogeneous"), default="uniform")
    parser.add_argument("--live-rss", action="store_true", help="also measure live-mode RSS in a child process")
    parser.add_argument("--live-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.live_child:
        live_child(args.live_child)
        return
    base_rss = rss_mb()
    started = time.perf_counter()
    if args.inventory == "uniform":
        inv, state = inventory(args.nodes), ()
    else:
        inv, *state = heterogeneous(args.nodes)
    generated = time.perf_counter()
    tracemalloc.start()
    ix = dra.build_index(inv, *state)
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    built = time.perf_counter()
    if args.live_rss:
        print(live_mode_rss(inv, *(state or (set(), {}, set()))))
    del inv
    print(f"inventory ({args.inventory}): {len(ix.devices)} devices on {len(ix.views)} nodes, {len(ix.shapes)} shapes, "
          f"{len(ix.node_groups)} node groups")
    print(f"generate {generated - started:.1f}s, index build {built - generated:.1f}s (traced), "
          f"index memory {index_bytes / 2**20:.0f} MB (tracemalloc), process RSS {rss_mb():.0f} MB "
          f"incl. the generated slices (start {base_rss:.0f} MB)")
    spec = dra.parse_claim_spec(CLAIM)
    timings, verdict = timed(spec, ix, args.runs, cold=False)
    cold, _ = timed(spec, ix, args.runs, cold=True)
    median, p99 = statistics.median(timings) * 1e3, percentile(timings, 0.99) * 1e3
    print(f"verdict: {verdict.status}, {verdict.message}")
    print(f"indexed check, selectors already evaluated on this index: median {median:.2f} ms, p99 {p99:.2f} ms "
          f"over {args.runs} runs")
    print(f"indexed check, selectors new to the index: median {statistics.median(cold) * 1e3:.2f} ms, "
          f"p99 {percentile(cold, 0.99) * 1e3:.2f} ms")
    impossible = dra.parse_claim_spec(IMPOSSIBLE)
    never_cold, never_verdict = timed(impossible, ix, max(5, args.runs // 10), cold=True)
    print(f"impossible claim (9 H100 on one node), new selectors: {never_verdict.status}; median "
          f"{statistics.median(never_cold) * 1e3:.1f} ms, p99 {percentile(never_cold, 0.99) * 1e3:.1f} ms")
    naive = naive_per_device(ix, args.naive_sample)
    print(f"naive per-device evaluation (sampled {args.naive_sample}, scaled): {naive * 1e3:.0f} ms")
    print(f"ratio naive/indexed (median, new selectors): {naive / statistics.median(cold):.0f}x")
    engine_comparison(ix)
    print(f"RSS at end {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
