"""Generated inventories and claims, judged by the oracle (Kubernetes 1.37 allocator, every
node of the case) and by our feasibility check: every case agrees, or the minimal one is
printed. Bounded here; bench/differential.py runs more."""

import pytest
from hypothesis import HealthCheck, given, settings

from tests.upstream import generators, judge
from tests.upstream.report import record

# The first test builds the oracle (Go), cold in about a minute or two.
pytestmark = pytest.mark.timeout(900)

SETTINGS = settings(max_examples=400, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_generated_cases_agree(oracle):
    @SETTINGS
    @given(generators.case())
    def check(case):
        answer = oracle.ask(judge.oracle_allocate_request(case, nodes=case["nodes"]))
        theirs = judge.scheduler_outcome(answer, case)
        ours, message = judge.our_allocation(case)
        record("random", ours == theirs, "")
        errors = [n["error"] for n in answer["nodes"] if n["error"]]
        assert ours == theirs, f"ours {ours} ({message}) vs upstream {theirs} {errors[:1]}\n{judge.case_yaml(case)}"

    check()
