"""Long fuzz run: N generated hostile reviews per family against the real app (in process).

Counts answers by endpoint and status, and any 5xx, any answer the failure rule gave (a crash),
and any patch that would not apply to the object sent. Families: generated pods and claims,
structure-aware forgeries (realistic objects with fields of the wrong shape), raw bodies.
Usage: python bench/fuzz.py [--examples 3000]   (6 families: 6 x N reviews)
"""

import argparse
import collections
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from app import kube  # noqa: E402
from app.cli import load_inventory  # noqa: E402
from app.server import (  # noqa: E402
    Metrics,  # noqa: E402
    PolicyHolder,
    ServiceState,
    create_app,  # noqa: E402
)
from tests.http.strategies import RAW_BODIES, claims, forged_claims, forged_pods, pods, reviews  # noqa: E402
from tests.http.test_fuzz import patch_applies, unfinished  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=3000)
    args = parser.parse_args()
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=load_inventory(None))
    counts = collections.Counter()
    problems = []
    with TestClient(create_app(state)) as client:
        def send(path, body):
            r = client.post(path, content=body)
            counts[(path, r.status_code)] += 1
            if r.status_code >= 500:
                problems.append((path, r.status_code, body[:300]))
            elif r.status_code == 200:
                response = r.json()["response"]
                if unfinished(response):
                    problems.append((path, "crash answered by the failure rule", body[:300]))
                elif not patch_applies(json.loads(body)["request"].get("object"), response):
                    problems.append((path, "patch does not apply", body[:300]))
            elif r.status_code == 400 and not r.json().get("error"):
                problems.append((path, "400 without message", body[:300]))

        opts = settings(max_examples=args.examples, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))
        families = {
            "mutate pods": (given(body=reviews(pods())), "/mutate"),
            "validate claims": (given(body=reviews(claims())), "/validate"),
            "validate pods": (given(body=reviews(pods())), "/validate"),
            "forged pods": (given(body=reviews(forged_pods())), None),
            "forged claims": (given(body=reviews(forged_claims())), "/validate"),
            "raw bodies": (given(body=RAW_BODIES), None),
        }
        started = time.perf_counter()
        for name, (decorate, path) in families.items():
            targets = [path] if path else ["/mutate", "/validate"]

            def run(body, targets=tuple(targets)):
                for target in targets:
                    send(target, body)
            opts(decorate(run))()
            print(f"{name}: done")
        elapsed = time.perf_counter() - started
    total = sum(counts.values())
    print(f"{total} reviews in {elapsed:.0f}s")
    for (path, status), n in sorted(counts.items()):
        print(f"  {path} {status}: {n}")
    print(f"5xx, crashes or patches that do not apply: {len(problems)}")
    for p in problems[:10]:
        print("  ", json.dumps(str(p))[:300])
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
