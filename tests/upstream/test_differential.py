"""Generated inventories and claims, judged by the oracle (Kubernetes 1.37 allocator, any of the
case's nodes) and by our feasibility check. Bounded here; bench/differential.py runs more."""

import pytest
from hypothesis import HealthCheck, given, settings

from tests.upstream import generators, judge
from tests.upstream.report import record

# The first test builds the oracle (Go), cold in about a minute or two.
pytestmark = pytest.mark.timeout(900)

SETTINGS = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def judged(oracle, case, nodes):
    answer = oracle.ask(judge.oracle_allocate_request(case, nodes=nodes))
    theirs = judge.allocation_outcome(answer)
    ours, message = judge.our_allocation(case)
    return answer, theirs, ours, message


def test_modelled_features_agree(oracle):
    """What we claim to model: every generated case agrees, or the minimal one is printed."""

    @SETTINGS
    @given(generators.case("modelled"))
    def check(case):
        # Asked about the nodes our inventory can know of (those its slices name).
        _answer, theirs, ours, message = judged(oracle, case, case["nodes"])
        record("random-modelled", ours == theirs, "")
        assert ours == theirs, f"ours {ours} ({message}) vs upstream {theirs}\n{judge.case_yaml(case)}"

    check()


def test_full_profile_disagreements_are_known_gaps(oracle):
    """Everything clusters publish: a disagreement must come from a gap we know of."""

    @SETTINGS
    @given(generators.case("full"))
    def check(case):
        answer, theirs, ours, message = judged(oracle, case, case["nodes"])
        record("random-full", ours == theirs, "")
        if ours != theirs:
            assert judge.explain(case, answer, ours), (
                f"unexplained: ours {ours} ({message}) vs upstream {theirs}\n{judge.case_yaml(case)}")

    check()
