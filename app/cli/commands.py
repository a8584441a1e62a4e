"""The runner of each command that sets one, imported only when it runs (`plan` never loads the
server): plain imports, so grep and the import contracts see every edge."""

from __future__ import annotations


def plan(args) -> int:
    from .plancli import run_plan
    return run_plan(args)


def check(args) -> int:
    from .checkcli import run_check
    return run_check(args)


def classes(args) -> int:
    from .classescli import run_classes
    return run_classes(args)


def audit(args) -> int:
    from .auditcli import run_audit
    return run_audit(args)


def quota(args) -> int:
    from .quotacli import run_quota
    return run_quota(args)


def rollout(args) -> int:
    from .rolloutcli import run_rollout
    return run_rollout(args)


def completion(args) -> int:
    from .completion import run_completion
    return run_completion(args)


def policy_test(args) -> int:
    from .policytestcli import run_policy_test
    return run_policy_test(args)


def policy_compile(args) -> int:
    from .policycompilecli import run_policy_compile
    return run_policy_compile(args)
