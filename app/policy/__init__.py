"""The policy in force: migration rules as data and per-namespace validation modes, parsed
from a policy file (or the bundled default) and looked up by namespace labels."""

from .policyfile import (
                         AnnotationRule,
                         Effective,
                         LabelSelector,
                         MigrationRules,
                         NodeLabelRule,
                         Policy,
                         ResourceRule,
                         SharingRule,
                         TopologyRule,
                         default_policy,
                         load_policy,
                         parse_policy,
)

__all__ = ["AnnotationRule", "Effective", "LabelSelector", "MigrationRules", "NodeLabelRule", "Policy", "ResourceRule", "SharingRule", "TopologyRule",
           "default_policy", "load_policy", "parse_policy"]
