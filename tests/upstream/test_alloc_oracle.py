"""Upstream's allocator table: the oracle reproduces upstream's expected allocations, and our
feasibility verdict is compared with the oracle's (Kubernetes 1.37 features, any node).
Disagreements are expected failures naming their cause (issue 11 fixes them)."""

import pytest

from tests.upstream import judge
from tests.upstream.alloc_cases import CASES, UNSATISFIABLE
from tests.upstream.report import record

# The first test builds the oracle (Go), cold in about a minute or two.
pytestmark = pytest.mark.timeout(900)

BY_NAME = {c["name"]: c for c in CASES}
assert len(BY_NAME) == len(CASES), "duplicate case names"
FEATURE_NAMES = ("AdminAccess", "CompatibilityGroups", "ConsumableCapacity", "DerivedAttributes",
                 "DeviceBindingAndStatus", "DeviceTaints", "FractionalCapacityRange", "ListTypeAttributes",
                 "OptionalNodeOperations", "PartitionableDevices", "PrioritizedList")
# One claim at a time is our scope (README): joint feasibility of several claims is not judged.
SEVERAL_CLAIMS = {c["name"] for c in CASES if len(c["claims"]) > 1}

# Cases ours is known to judge differently, with the cause (none left since issue 11).
DISAGREE: dict[str, str] = {}


def upstream_features(case):
    """The feature set upstream's test runs the case with: none on unless the case names them."""
    named = case["features"] or {}
    return {name: bool(named.get(name, False)) for name in FEATURE_NAMES}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_oracle_reproduces_upstream(oracle, name):
    case = BY_NAME[name]
    [answer] = oracle.allocate(**{k: v for k, v in judge.oracle_allocate_request(
        case, features=upstream_features(case)).items() if k != "op"})["nodes"]
    expect = case["expect"]
    if isinstance(expect, dict):
        assert answer["error"] and expect["error"] in answer["error"], answer
    elif expect == UNSATISFIABLE:
        assert answer["error"] is None and answer["allocations"] is None, answer
    else:
        assert answer["error"] is None, answer
        # Devices from several pools come in Go map order: compare each claim's results as a set.
        assert [sorted(c) for c in judge.results_of(answer)] == [sorted(map(tuple, c)) for c in expect]


@pytest.mark.parametrize("name", sorted(set(BY_NAME) - SEVERAL_CLAIMS))
def test_ours_agrees_with_the_oracle(oracle, name):
    case = BY_NAME[name]
    theirs = judge.scheduler_outcome(oracle.ask(judge.oracle_allocate_request(case, nodes=judge.nodes_of(case))), case)
    ours, message = judge.our_allocation(case)
    agrees = ours == theirs
    record("allocator-table", agrees, name)
    if name in DISAGREE:
        assert not agrees, f"ours agrees now: remove {name!r} from DISAGREE"
        pytest.xfail(DISAGREE[name])
    assert agrees, f"ours {ours} ({message}) vs upstream {theirs}"
