"""Issue 57 item 2: every outcome of a pod's decision is said in one place (its metric label,
whether it is routine), and every reader of an outcome handles each one."""

import pytest

from app.application import Decision, Outcome
from app.application.decision import SAID
from app.application.rollout import pods
from app.migration import Choice, Path, Plan


def test_every_outcome_has_its_words_and_no_two_share_a_label():
    assert set(SAID) == set(Outcome)
    labels = [o.metric for o in Outcome]
    assert len(set(labels)) == len(labels)
    assert Outcome.REWRITE.metric == "migrated"  # the metric's label, kept from before the enum


def test_the_webhook_logs_one_by_one_only_what_is_not_routine():
    from app.server.webhook import ROUTINE_OUTCOMES

    assert ROUTINE_OUTCOMES == {"migrated", "native", "unchanged"}


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_rollout_places_every_outcome(outcome):
    path = Choice(Path.LEGACY, "quota", "quota") if outcome is Outcome.LEGACY else None
    decision = Decision(outcome, None, Plan("unchanged", reason="r"), None, path, None, "refused" if
                        outcome is Outcome.DENIED else None)
    side, why = pods._where(decision)
    assert side in (pods.DRA, pods.PLUGIN, pods.DENIED) and why


def test_every_report_status_says_whether_it_stops_a_script_and_has_its_colour():
    from app.application.manifests import NEEDS_SOMEONE, STATUSES, ReportStatus, exit_status
    from app.cli.plancli import COLOURS

    assert set(NEEDS_SOMEONE) == set(ReportStatus) == set(COLOURS) == set(STATUSES)
    assert [s for s in ReportStatus if s.needs_someone] == [ReportStatus.UNSATISFIABLE, ReportStatus.NEEDS_ATTENTION]
    assert exit_status(["migrated", "unchanged"]) == 0 and exit_status(["unchanged", "needs-attention"]) == 1


def test_every_path_but_the_rewrite_is_an_outcome_of_its_own():
    from app.application.decision import LEFT_AS_WRITTEN

    assert set(LEFT_AS_WRITTEN) == set(Path) - {Path.REWRITE}
    assert all(outcome.value == path.value for path, outcome in LEFT_AS_WRITTEN.items())


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_webhook_answers_every_outcome(outcome):
    from app.application.answers import mutate_answer
    from app.migration import PlanStatus

    status = {Outcome.REWRITE: PlanStatus.MIGRATED, Outcome.UNMIGRATABLE: PlanStatus.UNMIGRATABLE}.get(
        outcome, PlanStatus.UNCHANGED)
    path = Choice(Path(outcome.value), "why", "policy") if outcome in (Outcome.NATIVE, Outcome.LEGACY) else None
    plan = Plan(status, pod={}, reason="r", warnings=["w"], rewritten={"template": "t"})
    decision = Decision(outcome, None, plan, b"[]" if outcome is Outcome.REWRITE else None, path, None,
                        "refused" if outcome is Outcome.DENIED else None)
    answer = mutate_answer("ns", "p", decision)
    assert answer.allowed is (outcome is not Outcome.DENIED)
    assert (answer.patch is not None) is (outcome is Outcome.REWRITE)


def test_a_status_is_written_as_its_word_in_yaml_and_json():
    import json

    from app.application.manifests import ReportStatus
    from app.common import dump_document

    row = {"status": ReportStatus.NEEDS_ATTENTION, "path": Outcome.LEGACY.value}
    assert dump_document(row) == "status: needs-attention\npath: legacy\n"
    assert json.loads(json.dumps(row)) == {"status": "needs-attention", "path": "legacy"}


@pytest.mark.parametrize("gpus, status, path", [(1, "migrated", "rewrite"), ("1e9", "needs-attention", "unmigratable")])
def test_a_manifest_report_names_its_pods_outcome(gpus, status, path):
    from app.application.manifests import plan_objects
    from app.policy import default_policy

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
                  "spec": {"template": {"spec": {"containers": [
                      {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}}
    [report] = plan_objects([("d.yaml", [(1, deployment)])], default_policy(), None).reports
    assert (report.status, report.path) == (status, path)
