"""`dra-bridge policy test|compile`: their arguments."""

from __future__ import annotations

from . import commands
from .flags import OFFLINE, opt


def add_policy(sub) -> None:
    p = sub.add_parser("policy", help="test a policy offline, or compile its rules into ValidatingAdmissionPolicies",
                       epilog="exit codes: those of its action (policy test --help)" + OFFLINE)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    test = actions.add_parser("test", help="run PolicyTest files: each resource through the webhooks' own chain",
                              epilog="A PolicyTest names `policy`, optional `inventory`, `resources` (files of pods, "
                                     "claims, templates, Namespaces) and `results` (kind, name, namespace, user, "
                                     "groups, result: allow|audit|warn|deny, rules). exit codes: 0 every result as "
                                     "expected; 1 one is not; 2 bad input (file and field named)" + OFFLINE)
    test.add_argument("path", nargs="+", metavar="PATH", help="PolicyTest file, or folder walked for them (required)")
    test.add_argument("-v", "--verbose", action="store_true",
                      help="every answer's messages, not only failures' (default: failures only)")
    compiled = actions.add_parser(
        "compile", help="the rules' parts the API server can enforce alone, as ValidatingAdmissionPolicies",
        epilog="Per-request and per-claim counts, DeviceClasses, admin access and legacy asks on pods become "
               "ValidatingAdmissionPolicies and bindings (stdout, for kubectl apply -f -): they hold while "
               "dra-bridge is down. What needs the inventory or other objects stays the webhook's, said per rule "
               "on stderr. exit codes: 0 written; 2 bad input, or with --require-all a part that cannot be "
               "compiled (field named, nothing written)" + OFFLINE)
    opt(compiled, "--policy", help="the policy file", shown="the bundled default policy")
    opt(compiled, "-o", "--output", choices=["yaml", "json"], default="yaml", help="stdout format")
    opt(compiled, "--require-all", action="store_true",
        help="fail (exit 2) when any part of a rule stays the webhook's")
    opt(compiled, "--quotas", action="store_true",
        help="also write the ResourceQuotas that make each rule's maxDevicesPerNamespace exact, per DeviceClass, "
             "in the namespaces the rule names")
    test.set_defaults(runner=commands.policy_test)
    compiled.set_defaults(runner=commands.policy_compile)
