"""The policy in force: migration rules as data, per-namespace modes and admin rules, parsed
from a policy file (or the bundled default) and looked up by namespace labels."""

from .policyfile import (
                         AnnotationRule,
                         Effective,
                         MigrationRules,
                         NodeLabelRule,
                         Policy,
                         ResourceRule,
                         SharingRule,
                         TopologyRule,
                         default_policy,
                         load_policy,
                         parse_policy,
                         read_policy_text,
                         settings_rule,
)
from .rules import MODE_ACTIONS, REQUEST_VARIABLES, LabelSelector, Rule
from .quotas import namespace_quotas
from .vap import Compiled, compile_policy, compile_rule, vap_changes

__all__ = ["Compiled", "compile_policy", "compile_rule", "vap_changes", "MODE_ACTIONS", "AnnotationRule", "Effective", "LabelSelector", "MigrationRules", "NodeLabelRule", "Policy",
           "ResourceRule", "Rule", "SharingRule", "TopologyRule", "default_policy", "load_policy", "parse_policy", "read_policy_text",
           "REQUEST_VARIABLES", "namespace_quotas", "settings_rule"]
