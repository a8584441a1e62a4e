"""Our feasibility verdicts against upstream Kubernetes' allocator on generated cases.

Draws N cases per profile (tests/upstream/generators.py), asks the oracle (Kubernetes 1.37
allocator, built from tests/upstream) and our check, and prints the agreement rate and each
disagreement's cause: the first known gap whose removal from the case makes us agree (removed
one after another), and any unexplained one as YAML.
Usage: python bench/differential.py [--cases 5000] [--profile full|modelled|both]
"""

import argparse
import collections
import pathlib
import sys
import time

from hypothesis import HealthCheck, given, settings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.upstream import generators, judge  # noqa: E402
from tests.upstream.oracle import Oracle  # noqa: E402


def run(profile: str, cases: int, oracle: Oracle) -> dict:
    tally = {"cases": 0, "agree": 0, "outcomes": collections.Counter(), "causes": collections.Counter(),
             "unexplained": []}

    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(generators.case(profile))
    def one(case):
        answer = oracle.ask(judge.oracle_allocate_request(case, nodes=case["nodes"]))
        theirs = judge.allocation_outcome(answer)
        ours, message = judge.our_allocation(case)
        tally["cases"] += 1
        tally["outcomes"][theirs] += 1
        if ours == theirs:
            tally["agree"] += 1
            return
        cause = judge.attribute(case, oracle) if profile == "full" else "unexplained"
        tally["causes"][cause] += 1
        if cause == "unexplained" and len(tally["unexplained"]) < 3:
            tally["unexplained"].append(f"ours {ours} ({message}) vs upstream {theirs}\n{judge.case_yaml(case)}")

    one()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="cases per profile")
    parser.add_argument("--profile", choices=["full", "modelled", "both"], default="both")
    args = parser.parse_args()
    oracle = Oracle()
    profiles = ["modelled", "full"] if args.profile == "both" else [args.profile]
    try:
        for profile in profiles:
            started = time.perf_counter()
            tally = run(profile, args.cases, oracle)
            seconds = time.perf_counter() - started
            rate = 100.0 * tally["agree"] / max(tally["cases"], 1)
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(tally["outcomes"].items()))
            print(f"{profile}: {tally['agree']} of {tally['cases']} cases agree ({rate:.1f}%) in {seconds:.0f}s; "
                  f"upstream said {outcomes}")
            if tally["causes"]:
                print("  cases  cause (the first known gap whose removal makes us agree)")
            for cause, count in tally["causes"].most_common():
                print(f"  {count:5d}  {cause}")
            for text in tally["unexplained"]:
                print("unexplained disagreement:\n" + text)
    finally:
        oracle.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
