"""`dra-bridge policy compile`: the part of each admin rule the API server enforces by itself, as
ValidatingAdmissionPolicies and bindings (kubectl apply -f -), so it holds while dra-bridge is
down; what stays the webhook's is said on stderr, rule by rule. --quotas adds the ResourceQuotas
that make namespace totals exact."""

from __future__ import annotations

import json
import sys

from app.common import InputError, dump_documents
from app.policy import compile_policy, load_policy, namespace_quotas


def run_policy_compile(args) -> int:
    policy = load_policy(args.policy)
    source = args.policy or "the bundled default policy"
    found = compile_policy(policy)[0]
    sys.stderr.write(f"compiled from {source}: {len(policy.rules)} rule(s)\n")
    for each in found:
        enforced = ", ".join(each.compiled) or "nothing"
        left = "; ".join(f"{name}: {why}" for name, why in each.webhook_only)
        sys.stderr.write(f"rule {each.rule}: enforced by the API server: {enforced}"
                         + (f"; webhook only: {left}" if left else "") + "\n")
    if args.require_all:
        short = [(i, each.rule, name, why) for i, each in enumerate(found) for name, why in each.webhook_only]
        if short:
            i, rule, name, why = short[0]
            raise InputError(f"rules[{i}].{name}", f"rule {rule}: cannot be a ValidatingAdmissionPolicy ({why}); "
                                                   "nothing written")
    objects = [obj for each in found for obj in each.objects]
    if args.quotas:
        quotas, said = namespace_quotas(policy)
        for line in said:
            sys.stderr.write(line + "\n")
        objects += quotas
    if args.output == "json":
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    elif objects:
        sys.stdout.write(dump_documents(objects))
    return 0
