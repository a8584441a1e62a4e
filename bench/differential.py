"""Our feasibility verdicts against upstream Kubernetes' allocator on generated cases.

Draws N cases (tests/upstream/generators.py), asks the oracle (Kubernetes 1.37 allocator, built
from tests/upstream) and our check, and prints the agreement rate, what upstream said, how
often each feature was drawn, and the first disagreements as YAML.
`--generator nvidia`: NVIDIA-shaped clusters (tests/upstream/nvidia_cases.py), each judged in process
and through `check`'s path (the case exported as an inventory file's objects).
Usage: python bench/differential.py [--cases 20000] [--seed 0] [--generator random|nvidia]
"""

import argparse
import collections
import pathlib
import sys
import time

from hypothesis import HealthCheck, given, seed, settings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.upstream import generators, judge, nvidia_cases  # noqa: E402
from tests.upstream.oracle import Oracle  # noqa: E402


def run(cases: int, oracle: Oracle, random_seed: int, generator: str = "random") -> dict:
    tally = {"cases": 0, "agree": 0, "outcomes": collections.Counter(), "features": collections.Counter(),
             "disagreements": []}

    @seed(random_seed)
    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(nvidia_cases.nvidia_case() if generator == "nvidia" else generators.case())
    def one(case):
        answer = oracle.ask(judge.oracle_allocate_request(case, nodes=case["nodes"]))
        theirs = judge.scheduler_outcome(answer, case)
        ours, message = judge.our_allocation(case)
        if generator == "nvidia" and ours == theirs:  # the CLI's path must agree too
            ours, message = judge.our_check(case, nvidia_cases.export(case))
            message = f"through check: {message}"
        tally["cases"] += 1
        tally["outcomes"][theirs] += 1
        tally["features"].update(case["features_used"])
        if ours == theirs:
            tally["agree"] += 1
        elif len(tally["disagreements"]) < 3:
            errors = [n["error"] for n in answer["nodes"] if n["error"]]
            tally["disagreements"].append(f"ours {ours} ({message}) vs upstream {theirs} {errors[:1]}\n"
                                          f"{judge.case_yaml(case)}")

    one()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", choices=("random", "nvidia"), default="random")
    args = parser.parse_args()
    oracle = Oracle()
    try:
        started = time.perf_counter()
        tally = run(args.cases, oracle, args.seed, args.generator)
        seconds = time.perf_counter() - started
    finally:
        oracle.close()
    rate = 100.0 * tally["agree"] / max(tally["cases"], 1)
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(tally["outcomes"].items()))
    print(f"{tally['agree']} of {tally['cases']} cases agree ({rate:.2f}%), "
          f"{tally['cases'] - tally['agree']} disagree, in {seconds:.0f}s; upstream said {outcomes}")
    print("cases drawing each feature: " + ", ".join(f"{k} {v}" for k, v in sorted(tally["features"].items())))
    for text in tally["disagreements"]:
        print("disagreement:\n" + text)
    return 0 if tally["agree"] == tally["cases"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
