"""The application layer between the shells (cli, server) and the domain: one facts constructor, the one
decision per pod with the admin rules, the webhooks' answers, manifest planning, the scan, the rollout."""

from .engine import KnownClaims, Lookup, NamespaceClaims, claim_usage, judge_pod, no_lookup, of_namespace, \
    pod_usage, subject_of
from .facts import UNKNOWN, ClusterFacts, EveryNamespace, cluster_facts, index_facts, inventory_source, snapshot_facts
from .planning import PlanCache, plan_with_patch, shape_key
from .decision import Decision, Outcome, decide_pod
from .validate import ADMIN_ACCESS_LABEL, Finding, Judgment, admin_label_rule, asks_admin_access, evaluate_claim, \
    evaluate_pod, unfinished_decision
from .answers import Answer, mutate_answer, validate_answer
from .unmigrated import per_namespace, unmigrated
from .sources import claim_objects, live_inventory, read_kueue_view
from .adminaccess import AdminAccess, admin_access
from . import chain, engine, manifests, planning, rollout, scan

__all__ = ["AdminAccess", "admin_access", "ADMIN_ACCESS_LABEL", "Answer", "ClusterFacts", "Decision", "EveryNamespace", "Finding", "Judgment", "KnownClaims", "Lookup",
           "NamespaceClaims", "Outcome", "PlanCache", "UNKNOWN", "admin_label_rule", "asks_admin_access", "chain", "claim_objects", "engine", "live_inventory", "read_kueue_view", "rollout", "snapshot_facts",
           "claim_usage", "cluster_facts", "decide_pod", "evaluate_claim", "evaluate_pod", "index_facts",
           "inventory_source", "judge_pod", "manifests", "planning", "mutate_answer", "no_lookup", "of_namespace", "plan_with_patch",
           "per_namespace", "pod_usage", "scan", "unmigrated", "shape_key", "subject_of", "unfinished_decision", "validate_answer"]
