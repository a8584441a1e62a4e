"""The policy a command that reads a cluster judges with: --policy FILE where given, else the one
that cluster's replicas enforce (kube.read_served_policy), said on stderr with its digest, so
`audit` finds what the webhook enforces rather than the bundled default."""

from __future__ import annotations

import sys

from kubernetes.client.exceptions import ApiException

from app.common import ClusterUnreachable, InputError, PolicyError
from app.kube import api_message, read_served_policy
from app.policy import Policy, default_policy, load_policy, parse_policy

DEFAULT_CONFIGMAP = "dra-bridge/dra-bridge-policy"


def configmap_name(text: str, flag: str = "--policy-configmap") -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise InputError(flag, f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def _refuses(text: str) -> str | None:
    try:
        parse_policy(text, "policy.yaml")
    except PolicyError as exc:
        return str(exc).splitlines()[0]
    return None


def policy_for(args, api) -> Policy:
    """--policy FILE; else, with a cluster (api), the policy its replicas enforce; else the bundled one."""
    if args.policy:
        return load_policy(args.policy)
    if api is None:
        return default_policy()
    namespace, name = configmap_name(getattr(args, "policy_configmap", None) or DEFAULT_CONFIGMAP)
    try:
        served = read_served_policy(api, namespace, name, getattr(args, "request_timeout", 30.0), _refuses)
    except ApiException as exc:
        raise ClusterUnreachable(f"the policy in force: ConfigMap {namespace}/{name}: {api_message(exc)} (--policy "
                                 "FILE judges with a file instead)") from exc
    sys.stderr.write(f"policy in force: {served.source}\n")
    return parse_policy(served.text, served.source) if served.text is not None else default_policy()


def live_policy_or(args, connect, offline):
    """plan and check: --policy FILE; with --inventory live, the policy the cluster's replicas
    enforce (said on stderr); else offline() (what the command judges with off a cluster)."""
    if args.policy or getattr(args, "inventory", None) != "live":
        return load_policy(args.policy) if args.policy else offline()
    found = connect()
    return policy_for(args, found[0]) if found is not None else offline()
