"""The migration planner, pure: legacy GPU requests and GPU Feature Discovery labels of a pod
become a ResourceClaimTemplate and a rewritten pod; pod templates found in any workload; the patch."""

from .controllers import keep_ray_gpu_count, left_to_admission
from .paths import Choice, Facts, Path, extended_resources, plugin_nodes, served_resources, tolerates_cordon
from .unmigrated import recreated, running
from .paths import choose as choose_path
from .patch import apply as apply_patch
from .patch import diff as patch_diff
from .claim_requests import MAX_REQUESTS, TEMPLATE_PREFIX
from .legacy import is_legacy, legacy_asks, legacy_resources
from .planner import MAX_DEVICES_PER_CLAIM, MIGRATION_ANNOTATION, Plan, PlanStatus, plan_pod
from .decision import DEFAULT_OPT_IN, OPT_IN_LABEL, UNKNOWN_FACTS, OptIn, Planner, Routed, decide, plan_only
from .budgets import clean_object, kueue_configuration, kueue_mappings, one_budget_classes, quota_changes
from .kueue import (KueueView, configuration_in, configured_mappings, kueue_in_objects, kueue_uncounted, kueue_view,
                    kueue_view_of, manager_args, unserved_versions)
from .continuity import BudgetUse, quota_use
from .queue_budgets import QueueUse, queue_use
from .quota_charge import EXTENDED_CLAIM_ANNOTATION, charged, claim_asks, pod_charge
from .podshape import pod_errors
from .podgroups import group_claim_names, pod_group_of
from .asks import Ask, PodAsks, asked
from .family_asks import whole_devices
from .sharing import ClusterSharing, ShareableDevices
from .quota import kueue_per_pod, quota_additions, quota_escapes
from .preemption import PREEMPTED, PREEMPTS, Preemption, gpu_pod_priorities, preemption_of
from .workloads import is_pod_spec, pod_templates

__all__ = ["group_claim_names", "pod_group_of", "EXTENDED_CLAIM_ANNOTATION", "charged", "claim_asks", "pod_charge", "QueueUse", "queue_use", "kueue_in_objects", "clean_object", "one_budget_classes", "kueue_view_of", "KueueView", "configuration_in", "kueue_uncounted", "kueue_view", "manager_args", "configured_mappings", "BudgetUse", "quota_use", "kueue_configuration", "kueue_mappings", "quota_changes", "DEFAULT_OPT_IN", "OPT_IN_LABEL", "UNKNOWN_FACTS", "recreated", "running", "tolerates_cordon", "OptIn", "Planner", "Routed", "decide", "plan_only", "MAX_DEVICES_PER_CLAIM", "MAX_REQUESTS", "MIGRATION_ANNOTATION", "TEMPLATE_PREFIX", "Choice", "Path", "ClusterSharing",
           "Facts", "Plan", "PlanStatus", "whole_devices", "ShareableDevices",
           "apply_patch", "choose_path", "keep_ray_gpu_count", "left_to_admission", "is_pod_spec", "is_legacy", "legacy_asks", "legacy_resources", "PodAsks", "Ask", "asked", "patch_diff", "plan_pod", "plugin_nodes", "pod_errors",
           "pod_templates", "kueue_per_pod", "quota_additions", "quota_escapes", "served_resources", "extended_resources",
           "Preemption", "preemption_of", "PREEMPTS", "PREEMPTED",
           "unserved_versions", "gpu_pod_priorities"]
