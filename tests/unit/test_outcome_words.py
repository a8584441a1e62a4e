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
