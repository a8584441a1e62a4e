"""Feasibility of a 3-request claim against 100,000 devices on 12,500 nodes.

Prints index build time and RSS, the median and p99 of `dra.check`, and the same
selectors evaluated naively per device (measured on a sample, scaled to the inventory) in
the same run, with the ratio. Usage: python bench/validate.py [--nodes 12500] [--runs 200]
"""

import argparse
import dataclasses
import pathlib
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
            sel.matches(variable)
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
    args = parser.parse_args()
    base_rss = rss_mb()
    started = time.perf_counter()
    inv = inventory(args.nodes)
    generated = time.perf_counter()
    tracemalloc.start()
    ix = dra.build_index(inv)
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    built = time.perf_counter()
    del inv
    print(f"inventory: {len(ix.devices)} devices on {len(ix.by_node)} nodes, {len(ix.shapes)} shapes, "
          f"{len(ix.node_groups)} node groups")
    print(f"generate {generated - started:.1f}s, index build {built - generated:.1f}s (traced), "
          f"index memory {index_bytes / 2**20:.0f} MB (tracemalloc), process RSS {rss_mb():.0f} MB "
          f"incl. the generated slices (start {base_rss:.0f} MB)")
    spec = dra.parse_claim_spec(CLAIM)
    timings = []
    verdict = None
    for _ in range(args.runs):
        t = time.perf_counter()
        verdict = dra.check(spec, ix)
        timings.append(time.perf_counter() - t)
    cold = []
    for _ in range(args.runs):
        ix.selector_cache.clear()  # as for a claim whose selectors this index has not seen
        t = time.perf_counter()
        dra.check(spec, ix)
        cold.append(time.perf_counter() - t)
    median, p99 = statistics.median(timings) * 1e3, percentile(timings, 0.99) * 1e3
    print(f"verdict: {verdict.status}, {verdict.message}")
    print(f"indexed check, selectors already evaluated on this index: median {median:.2f} ms, p99 {p99:.2f} ms "
          f"over {args.runs} runs")
    print(f"indexed check, selectors new to the index: median {statistics.median(cold) * 1e3:.2f} ms, "
          f"p99 {percentile(cold, 0.99) * 1e3:.2f} ms")
    naive = naive_per_device(ix, args.naive_sample)
    print(f"naive per-device evaluation (sampled {args.naive_sample}, scaled): {naive * 1e3:.0f} ms")
    print(f"ratio naive/indexed (median, new selectors): {naive / statistics.median(cold):.0f}x")
    engine_comparison(ix)
    print(f"RSS at end {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
