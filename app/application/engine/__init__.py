"""The admin-policy engine: a subject (pod, claim, template) and what it uses, judged against the
rules that apply (judge), as violations with their rule and actions; report turns them into PolicyReports."""

from . import report
from .served import judge_served, served_pod
from .judging import Claim, Subject, Usage, Violation, applies, judge
from .usage import (KnownClaims, Lookup, NamespaceClaims, PodJudgment, claim_usage, judge_pod, judgeable, needs_requester,
                    no_lookup, of_namespace, pod_usage, subject_of)

__all__ = ["Claim", "KnownClaims", "Lookup", "NamespaceClaims", "PodJudgment", "Subject", "Usage", "Violation",
           "applies", "claim_usage", "judge", "judge_pod", "judge_served", "judgeable", "needs_requester", "no_lookup", "of_namespace",
           "pod_usage", "report", "served_pod", "subject_of"]
