"""How a command's flags are declared: each help says its default and, where one applies, the
DRA_BRIDGE_* variable that sets it; the shared exit-code and variable sentences of the epilogs."""

from __future__ import annotations

import os

from app.common import InputError
from app.common import release as releases
from app.migration import OPT_IN_LABEL

from .parser import BadValue, positive_seconds

EXITS = "exit codes: 0 done; 2 bad input or configuration (one line naming the flag, file or field)"
# The offline commands read no DRA_BRIDGE_* variable (those configure the serve and reporter
# daemons): a variable exported for `serve` must not change what `plan` prints.
OFFLINE = "; no DRA_BRIDGE_* variable applies to this command"
LIVE = "; 3 could not ask the cluster (--inventory live: --kubeconfig, --context)"
VARIABLES = "; variables: DRA_BRIDGE_KUBECONFIG and DRA_BRIDGE_CONTEXT only (as serve reads them)"
_TRUE = ("1", "true", "yes", "on")


def opt(p, *names: str, env: str | None = None, default=None, shown: str | None = None, **kw) -> None:
    """A flag whose help says its default and, for `env`, the DRA_BRIDGE_* variable that sets it."""
    var = f"DRA_BRIDGE_{env.upper().replace('-', '_')}" if env else None
    raw = os.environ.get(var) if var else None
    flag = kw.get("action") == "store_true"
    if raw is not None:
        if flag:
            default = raw.lower() in _TRUE
        else:
            try:
                default = kw.get("type", str)(raw)
            except ValueError as exc:
                said = str(exc) if isinstance(exc, BadValue) else f"{raw!r} is not a valid value"
                raise InputError(var, f"{said} (for {names[-1]})") from exc
            if kw.get("choices") and default not in kw["choices"]:
                raise InputError(var, f"{raw!r}: choose from {', '.join(map(str, kw['choices']))}")
    elif flag:
        default = False
    text = shown if shown is not None else ("off" if flag else "none" if default is None else str(default))
    extra = f"default: {text}" + (f"; env {var}" if var else "")
    p.add_argument(*names, default=default, help=f"{kw.pop('help', '')} ({extra})".lstrip(), **kw)


def opt_in(p, elsewhere: str) -> None:
    opt(p, "--opt-in-label", default=OPT_IN_LABEL,
        help="KEY=VALUE: the namespace label the mutating webhook's namespaceSelector selects (serve's "
             f"--template-namespace-label); {elsewhere}; '' for every namespace")


def kube_flags(p, request_timeout: bool = True, env: bool = True) -> None:
    """env False: the offline commands, which read no DRA_BRIDGE_* variable."""
    opt(p, "--kubeconfig", env="kubeconfig" if env else None,
        help="kubeconfig file; else $KUBECONFIG (several paths merged), ~/.kube/config, the in-cluster "
             "service account", shown="as kubectl finds it")
    opt(p, "--context", env="context" if env else None, help="kubeconfig context", shown="the current context")
    if request_timeout:  # the CLI's; the daemons bound each call by their own --api-timeout
        opt(p, "--request-timeout", type=positive_seconds, default=30.0,
            help="seconds a single request to the API server may take before the command gives up (exit 3), "
                 "as kubectl's")


def release_flags(p, live: bool = False, env: bool = False) -> None:
    """--kube-version and --feature-gates: the release a command judges and writes for (env: the
    daemons' DRA_BRIDGE_* variables set them too). With a cluster its /version wins, and a
    different --kube-version is refused."""
    said = f"{releases.DEFAULT_VERSION}" + (", or the cluster's own /version when it reads one" if live else "")
    opt(p, "--kube-version", env="kube_version" if env else None, shown=said,
        help=f"the Kubernetes release to judge and write for (1.{releases.OLDEST} to 1.{releases.NEWEST}: which DRA "
             "fields it keeps, its allocator's rules), as `helm template --kube-version`")
    opt(p, "--feature-gates", env="feature_gates" if env else None, shown="the release's defaults",
        help="DRA feature gates an admin set on that release's API server and scheduler, as kube-apiserver spells "
             "them: DRADeviceTaints=true,DRAConsumableCapacity=false")


def cluster_policy_flags(p, what: str = "policy file", offline: str = "the bundled one") -> None:
    """--policy and --policy-configmap of a command that reads a cluster (servedpolicy.policy_for)."""
    opt(p, "--policy", help=what, shown=f"the policy the cluster's replicas enforce (--policy-configmap); offline: "
                                        f"{offline}")
    opt(p, "--policy-configmap", default="dra-bridge/dra-bridge-policy",
        help="NAMESPACE/NAME of the ConfigMap the replicas load their policy from (where it is refused, the copy "
             "they kept beside it, NAME-last-good)")
