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


NVIDIA_SETTINGS = settings(max_examples=200, deadline=None, database=None, derandomize=True,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_nvidia_shaped_cases_agree_in_process_and_through_the_cli(oracle):
    """Issue 24: inventories as NVIDIA's driver (our reporter) publishes them, with claims holding
    devices, MIG devices and shares; judged in process and as `check --inventory FILE` reads an
    export, both against the scheduler-level outcome."""
    from tests.upstream.nvidia_cases import export, nvidia_case

    @NVIDIA_SETTINGS
    @given(nvidia_case())
    def check(case):
        answer = oracle.ask(judge.oracle_allocate_request(case, nodes=case["nodes"]))
        theirs = judge.scheduler_outcome(answer, case)
        ours, message = judge.our_allocation(case)
        cli, cli_message = judge.our_check(case, export(case))
        record("nvidia", ours == theirs, "")
        record("nvidia-cli", cli == theirs, "")
        errors = [n["error"] for n in answer["nodes"] if n["error"]]
        assert ours == theirs, f"ours {ours} ({message}) vs upstream {theirs} {errors[:1]}\n{judge.case_yaml(case)}"
        assert cli == theirs, f"check {cli} ({cli_message}) vs upstream {theirs} {errors[:1]}\n{judge.case_yaml(case)}"

    check()
