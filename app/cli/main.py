"""Command line: `dra-bridge serve | certs | plan | check | audit | reporter` (also `python -m app`,
`kubectl dra-bridge`): the command tree (each parser names the module that runs it; flags are
declared as `flags` says), dispatch, and the one-line error every command ends with."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from app import __version__
from app.common import BridgeError, ClusterUnreachable, InputError, PolicyError, vocabulary
from app.migration import OPT_IN_LABEL

from . import commands
from .flags import EXITS, LIVE, OFFLINE, VARIABLES, cluster_policy_flags, kube_flags, opt, opt_in, release_flags
from .logsetup import setup_logging
from .inputs import INVENTORY_HELP
from .parser import Parser, at_least, port, positive_seconds, seconds
from .policyargs import add_policy

EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3  # could not ask the cluster: never read as an answer
log = logging.getLogger("dra_bridge")


DESCRIPTION = """Moves Kubernetes GPU workloads from the device plugin onto DRA (resource.k8s.io/v1).

Also installed as kubectl-dra_bridge: `kubectl dra-bridge audit --context prod` works the same."""
def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="run the admission webhook over TLS", epilog=
                       EXITS.replace("0 done", "0 stopped by SIGTERM after draining") +
                       "; every flag is also read from its DRA_BRIDGE_* variable",
                       description="The admission webhook: /mutate migrates legacy GPU pods, /validate judges "
                                   "claims, templates and pods against the device inventory.")
    opt(p, "--host", env="host", default="0.0.0.0", help="address to listen on")
    opt(p, "--port", env="port", default=8443, type=port, help="HTTPS port for reviews (0: any free port)")
    opt(p, "--tls-cert", env="tls_cert", default="certs/tls.crt",
        help="serving certificate (with --tls-key: development certificates are generated when both are absent)")
    opt(p, "--tls-key", env="tls_key", default="certs/tls.key", help="its private key")
    opt(p, "--client-ca", env="client_ca", help="require client certificates signed by this CA")
    opt(p, "--policy", env="policy", help="policy file (YAML or JSON), watched for changes",
        shown="the bundled policy")
    opt(p, "--policy-optional", env="policy_optional", action="store_true",
        help="a missing --policy file means the bundled default, until it appears (the admin's ConfigMap, mounted "
             "optional: an upgrade that ships no policy never replaces it)")
    opt(p, "--admission-policies", env="admission_policies", default="off", choices=["sync", "off"],
        help="sync: keep the policy's compiled ValidatingAdmissionPolicies and bindings in the cluster (one replica "
             "at a time, by a Lease in $POD_NAMESPACE), so their part of each rule holds while dra-bridge is down; "
             "off: leave them alone")
    opt(p, "--policy-configmap", env="policy_configmap", default="",
        help="NAMESPACE/NAME of the ConfigMap the policy file comes from: a reload it refuses (or takes again) "
             "is an Event there", shown="no Events")
    opt(p, "--demo", env="demo", action="store_true",
        help="no Kubernetes API and the bundled example inventory, whatever kubeconfig is around (`make run`); "
             "without it, serve talks to a cluster only when in-cluster or given --kubeconfig/--context")
    opt(p, "--inventory", env="inventory", help=INVENTORY_HELP + "; live is watched",
        shown="live with a cluster; example in demo mode")
    release_flags(p, live=True, env=True)
    kube_flags(p, request_timeout=False)
    opt(p, "--log-format", env="log_format", default="text", choices=["json", "text"], help="log lines as")
    opt(p, "--log-level", env="log_level", default="info", choices=["debug", "info", "warning", "error"],
        help="least severe level logged")
    opt(p, "--api-timeout", env="api_timeout", default=2.0, type=positive_seconds, help="seconds for one Kubernetes API call")
    opt(p, "--review-deadline", env="review_deadline", default=4.0, type=positive_seconds,
        help="seconds a review may take before the policy's onInternalError answers it (keep below the "
             "webhooks' timeoutSeconds)")
    opt(p, "--template-namespace-label", env="template_namespace_label", default=OPT_IN_LABEL,
        help="write templates only in namespaces with this label (the mutating webhook's namespaceSelector); "
             "'' for any")
    opt(p, "--template-gc-grace", env="template_gc_grace", default=0.0, type=seconds,
        help="delete generated templates no pod has named for this many seconds (one replica at a time, by a "
             "Lease in $POD_NAMESPACE); 0: never")
    opt(p, "--template-gc-interval", env="template_gc_interval", default=300.0, type=positive_seconds,
        help="seconds between template collection rounds")
    opt(p, "--unmigrated-interval", env="unmigrated_interval", default=120.0, type=seconds,
        help="seconds between counts of running pods in opted-in namespaces still on device-plugin GPUs the "
             "webhook would rewrite (metric dra_bridge_unmigrated_pods; 0: off)")
    opt(p, "--health-port", env="health_port", default=0, type=port,
        help="also serve /healthz, /readyz and /metrics over plain HTTP on this port (0: off)")
    opt(p, "--read-timeout", env="read_timeout", default=10.0, type=positive_seconds,
        help="seconds a client may take to send a request's headers, and then its body")
    opt(p, "--max-connections", env="max_connections", default=1000, type=at_least(1),
        help="open connections and requests in flight; more are answered 503")
    opt(p, "--reload-interval", env="reload_interval", default=5.0, type=positive_seconds,
        help="seconds between checks for rotated certificates and a changed policy file")
    opt(p, "--drain-seconds", env="drain_seconds", default=100.0, type=seconds,
        help="on SIGTERM, keep answering (not ready, each answer closing its connection) until the API server "
             "has closed every connection, at most this long: longer than its 90 s idle timeout, inside "
             "terminationGracePeriodSeconds; 0: stop at once")
    opt(p, "--drain-min-seconds", env="drain_min_seconds", default=5.0, type=seconds,
        help="on SIGTERM, serve at least this long, connections or not: the Service's endpoints take this long "
             "to drop the replica, and a connection opened meanwhile must find it listening")


def _add_certs(sub) -> None:
    p = sub.add_parser("certs", help="create a CA and serving certificate for the webhook Service",
                       epilog=EXITS + OFFLINE,
                       description="Write ca.crt, tls.crt and tls.key for the webhook Service into --out; with "
                                   "--inject, also a kustomize overlay there that deploys that base with them "
                                   "(`kubectl apply -k OUT`). The base is never edited.")
    opt(p, "--service", default="dra-bridge", help="the webhook Service's name")
    opt(p, "--namespace", default="dra-bridge", help="its namespace")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="folder for the files, created when missing; keep it outside the repository "
                        "(`certs/` holds the development certificates of `make run`) (required)")
    opt(p, "--force", action="store_true", help="replace certificates already in --out")
    opt(p, "--days", default=365, type=at_least(1), help="validity in days")
    opt(p, "--host", action="append", default=[], shown="none", help="extra DNS name or IP (repeatable)")
    opt(p, "--inject", metavar="BASE",
        help="a kustomize base (manifests/): write OUT/kustomization.yaml deploying it with this CA in its "
             "webhook configurations and the Secret dra-bridge-tls from these files")
    opt(p, "--image", help="with --inject (required there): the image to deploy (REPO:TAG or REPO@sha256:DIGEST)",
        shown="none")
    opt(p, "--audit-cronjob", nargs="?", const="beside", metavar="COMPONENT", shown="none",
        help="with --inject: add the PolicyReport CronJob (manifests/audit, beside the base unless named)")
    opt(p, "--cert-manager", action="store_true",
        help="with --inject: cert-manager issues the certificate; the overlay holds no key (commit it)")


def _inputs(p) -> None:
    p.add_argument("-f", "--filename", action="append", required=True,
                   help="file, folder (walked in name order) or - for stdin (repeatable; required)")


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="offline migration of manifests", description=
                       "Migrate the pod templates in any manifest offline: templates and rewritten objects on "
                       "stdout, a summary table on stderr.", epilog=
                       "exit codes: 0 every object migrated or unchanged; 1 an object is unsatisfiable on "
                       "--inventory or needs attention; 2 bad input (file and line named)" + LIVE + OFFLINE)
    p.set_defaults(runner=commands.plan)
    _inputs(p)
    kube_flags(p, env=False)
    cluster_policy_flags(p)
    opt(p, "--inventory", help=INVENTORY_HELP + ": check each migration against it", shown="none: not checked")
    release_flags(p, live=True)
    opt(p, "-n", "--namespace", help="namespace for objects that name none (where their templates go)",
        shown="none")
    opt(p, "-o", "--output", choices=["yaml", "json", "diff", "report", "table", "wide"], default="yaml",
        help="yaml, json: the objects to apply (json as a List); diff: per object; report: each object's verdict; "
             "table, wide: only the summary table, on stdout (wide: every reason, uncut)")
    p.add_argument("--wide", action="store_true", help="the summary table with every reason, uncut (default: cut at 160)")


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="validate ResourceClaims/Templates against an inventory offline", epilog=
                       "exit codes: 0 every claim satisfiable; 1 one is not (never, not now, invalid); 2 bad "
                       "input, or no ResourceClaim or ResourceClaimTemplate in the input" + LIVE + OFFLINE)
    p.set_defaults(runner=commands.check)
    _inputs(p)
    kube_flags(p, env=False)
    opt(p, "--inventory", help=INVENTORY_HELP + " (required: none judges nothing)", shown="none")
    release_flags(p, live=True)
    cluster_policy_flags(p, "policy file: also judge claims, templates and pods by its rules, as the webhooks "
                            "would (exit 1 when one is denied)", offline="rules not judged")
    opt(p, "-o", "--output", choices=["table", "text", "wide", "json", "yaml"], default="table",
        help="stdout format (text: the same as table; wide: every message uncut, with the allocator's warnings)")


def _add_classes(sub) -> None:
    p = sub.add_parser("classes", help="DeviceClasses serving nvidia.com/gpu and MIG resources through DRA "
                                       "(native path)", epilog=EXITS + LIVE + OFFLINE)
    p.set_defaults(runner=commands.classes)
    kube_flags(p, env=False)
    opt(p, "--inventory", help=INVENTORY_HELP + " (required: none judges nothing)", shown="none")
    opt(p, "--driver", default=vocabulary.NVIDIA_DRIVER, help="the DRA driver whose devices the classes select")
    release_flags(p, live=True)


def _add_audit(sub) -> None:
    p = sub.add_parser("audit", help="list pods and workloads still on legacy GPU resources", epilog=
                       "exit codes: 0 nothing needs attention; 1 an object is unsatisfiable on --inventory or "
                       "needs attention; 2 bad input, or no cluster configured; 3 could not ask the cluster" + VARIABLES)
    p.set_defaults(runner=commands.audit)
    p.add_argument("-f", "--filename", action="append",
                   help="audit these files instead of the cluster (repeatable) (default: the cluster)")
    kube_flags(p)
    opt(p, "-n", "--namespace", help="only this namespace of the cluster; with -f, the namespace of objects "
                                     "that name none", shown="all namespaces / default")
    opt(p, "--inventory", help=INVENTORY_HELP + ": check each migration against it", shown="none: not checked")
    release_flags(p, live=True)
    cluster_policy_flags(p)
    opt(p, "-o", "--output", choices=["table", "wide", "json", "yaml", "policyreport"], default="table",
        help="stdout format (wide: every reason, uncut)")
    opt(p, "--write-reports", action="store_true", help="with -o policyreport on a cluster: write the reports there "
        "(server-side apply, read back; exit 0 once written, findings or not: what the shipped CronJob runs)")
    opt_in(p, "pods of namespaces without it are left as written")


def _add_quota(sub) -> None:
    p = sub.add_parser("quota", help="GPU quotas and Kueue queues: the DRA keys that make migrated pods count "
                       "against the same budgets (printed, never written)", epilog="exit codes: 0 every budget counts "
                       "them already; 1 changes proposed; 2 bad input, or no cluster configured; 3 could not ask the cluster" + VARIABLES)
    p.set_defaults(runner=commands.quota)
    p.add_argument("-f", "--filename", action="append", help="ResourceQuotas, DeviceClasses, ClusterQueues, Kueue's "
                   "ConfigMap from these files (repeatable) (default: the cluster)")
    kube_flags(p)
    cluster_policy_flags(p, "policy file (the planner's resource -> DeviceClass rules)")
    opt(p, "-o", "--output", choices=["yaml", "json", "diff", "table", "wide"], default="yaml",
        help="yaml, json: the objects to apply (json as a List); diff: their diffs; table, wide: one row each "
             "(wide: uncut)")
    opt(p, "--budget", choices=["split", "one"], default="split", help="split: a DeviceClass quota key beside each "
        "limit (1.34+); one: the class declares the resource: one limit over both sides (1.36+, KEP-5004)")
    release_flags(p, live=True)


def _add_reporter(sub) -> None:
    p = sub.add_parser("reporter", help="publish this node's GPUs as ResourceSlices", epilog=
                       "exit codes: 0 done; 2 bad input or configuration; 3 no NVML library; 4 NVML without a "
                       "driver; 5 no GPUs; 6 NVIDIA's kubelet plugin already publishes for this node (use "
                       "--mode=shadow); 7 an NVML call every slice needs failed; every flag is also read "
                       "from its DRA_BRIDGE_* variable")
    opt(p, "--backend", env="backend", default="nvml", help="'nvml' or 'fake:FILE' (a GPU description YAML)")
    opt(p, "--node-name", env="node_name", default=os.environ.get("NODE_NAME") or None,
        help="this node; also $NODE_NAME (required)", shown=os.environ.get("NODE_NAME") or "$NODE_NAME")
    opt(p, "--mode", env="mode", choices=["publish", "shadow"],
        help="shadow: slices only the validator reads, safe beside the device plugin; publish: for the "
             "scheduler, only on nodes the device plugin no longer serves",
        shown="shadow (as the DaemonSet); --once prints NVIDIA's own schema, publish, as it writes nothing")
    opt(p, "--driver-name", env="driver_name", help="driver in published slices",
        shown="gpu.nvidia.com; shadow.gpu.dra-bridge.io in shadow mode")
    opt(p, "--interval", env="interval", default=30.0, type=positive_seconds, help="seconds between refreshes")
    opt(p, "--cleanup-on-exit", env="cleanup_on_exit", action="store_true", help="delete our slices on shutdown")
    opt(p, "--shareable", env="shareable", action="store_true",
        help="publish whole GPUs as shareable (allowMultipleAllocations with memory and dra-bridge.io/cores "
             "capacities): for GPUs time-sliced or MPS-shared")
    opt(p, "--partitionable", env="partitionable", action="store_true",
        help="publish GPUs that list MIG profiles as NVIDIA's dynamic MIG does: the full GPU and every possible "
             "MIG placement drawing on shared counters (where DRAPartitionableDevices is on: 1.36+ by default)")
    release_flags(p, live=True, env=True)
    opt(p, "--once", action="store_true", help="print the slices and exit")
    p.add_argument("--with-classes", action=argparse.BooleanOptionalAction, default=True,
                   help="with --once, also print the DeviceClasses the slices need (NVIDIA's gpu/mig classes) "
                        "(default: on)")
    opt(p, "-o", "--output", choices=["yaml"], default="yaml", help="--once output format")
    kube_flags(p, request_timeout=False)
    opt(p, "--health-port", env="health_port", default=8081, type=port, help="/healthz and /metrics port (0: off)")
    p.add_argument("--max-rounds", type=int, default=0, help=argparse.SUPPRESS)
    opt(p, "--log-format", env="log_format", default="text", choices=["json", "text"], help="log lines as")


def _add_rollout(sub) -> None:
    p = sub.add_parser("rollout", help="move GPU nodes off the device plugin onto DRA, wave by wave",
                       description="Waves of GPU nodes leave the device plugin for NVIDIA's DRA driver: each node "
                                   "is cordoned, its GPU pods evicted through the Eviction API (PodDisruptionBudgets "
                                   "always respected; bare pods only with --force), its labels flipped, and uncordoned once its ResourceSlices publish "
                                   "what the device plugin advertised. Every step is recorded on the node: a "
                                   "stopped wave continues when run again.",
                       epilog="exit codes: each action's (`dra-bridge rollout ACTION --help`)" + VARIABLES)
    p.set_defaults(runner=commands.rollout)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    kube_flags(common)
    cluster_policy_flags(common, "the webhook's policy file (which pods it would rewrite)")
    opt(common, "--plugin-label", default=f"{vocabulary.DEVICE_PLUGIN_SWITCH}=true,false",
        help="KEY=ON,OFF: the node label that runs the device plugin (the GPU Operator's)")
    opt(common, "--dra-label", default=f"{vocabulary.DRA_PLUGIN_SWITCH}=true",
        help="KEY=VALUE: the node label that runs NVIDIA's DRA kubelet plugin (its chart's kubeletPlugin.nodeSelector)")
    opt(common, "--driver", default=vocabulary.NVIDIA_DRIVER, help="the DRA driver whose slices a moved node must publish")
    opt(common, "--nodes", help="only nodes matching this label selector, as kubectl -l (k=v, k!=v, k, !k, k in (a,b), k notin (a,b))",
        shown="every GPU node")
    opt_in(common, "pods elsewhere are recreated as written")
    waves = argparse.ArgumentParser(add_help=False)
    size = waves.add_mutually_exclusive_group()
    opt(size, "--wave-size", type=at_least(1), default=1, help="nodes per wave")
    opt(size, "--max-unavailable-gpus", type=at_least(1), help="GPUs per wave at most (instead of --wave-size)",
        shown="none")
    opt(waves, "--force", action="store_true",
        help="evict bare pods too (nothing recreates them: they are lost), as `kubectl drain --force`")
    opt(waves, "--delete-emptydir-data", action="store_true",
        help="evict pods with emptyDir volumes (their data is deleted), as `kubectl drain --delete-emptydir-data`")
    exits = ("exit codes: 0 done; 1 {what}; 2 bad input; 3 could not ask the cluster" + VARIABLES)
    plan = actions.add_parser("plan", parents=[common, waves], help="the waves, their pods and what blocks them",
                              epilog=exits.format(what="a wave is blocked"))
    plan.add_argument("-f", "--filename", action="append",
                      help="an export instead of the cluster (repeatable) (default: the cluster)")
    opt(plan, "-o", "--output", choices=["table", "wide", "json", "yaml"], default="table", help="stdout format")
    opt(plan, "--undo", type=at_least(1), metavar="WAVE", help="plan taking this wave back instead, as `rollout undo` "
                                                       "judges it before acting", shown="the waves forward")
    for name, text in (("run", "move the nodes of one wave"), ("undo", "move a wave's nodes back")):
        action = actions.add_parser(name, parents=[common, waves], help=text, epilog=exits.format(
            what="the wave is blocked, or stopped (a budget refused an eviction, a wait timed out): run it again"))
        action.add_argument("--wave", type=at_least(1), required=True, help="the wave's number, as `rollout plan` lists it (required)")
        opt(action, "--dry-run", choices=["none", "server"], default="none",
            help="server: every write a server-side dry run, no waiting")
        opt(action, "--timeout", type=positive_seconds, default=600.0, help="seconds to wait for an eviction a budget "
                                                                  "refuses, for pods to leave, for slices")
        opt(action, "--lease-namespace", default="dra-bridge",
            help="where the Lease that allows one rollout at a time lives (dra-bridge-rollout)")
        opt(action, "--force-takeover", action="store_true",
            help="take the rollout Lease an expired holder left (a command that died); never one still renewed")
    status = actions.add_parser("status", parents=[common], help="nodes and GPUs per side, pods per path",
                                epilog=EXITS + VARIABLES)
    status.add_argument("-f", "--filename", action="append",
                        help="an export instead of the cluster (repeatable) (default: the cluster)")
    opt(status, "-o", "--output", choices=["table", "wide", "json", "yaml"], default="table",
        help="stdout format (wide: every pod in trouble named, not the first 5)")
    status.epilog = ("exit codes: 0 every GPU pod bound where it asks; 1 a GPU pod is Pending, on a node that no "
                     "longer advertises what it holds, or a GPU workload is short of pods (each named); 2 bad "
                     "input; 3 could not ask the cluster" + VARIABLES)
    status.set_defaults(wave_size=1, max_unavailable_gpus=None)


def _add_completion(sub) -> None:
    p = sub.add_parser("completion", help="shell completion: `source <(dra-bridge completion bash)`",
                       epilog=EXITS + OFFLINE, description="Print a completion script for bash, zsh or fish. "
                       "kubectl completes `kubectl dra-bridge` through the installed kubectl_complete-dra_bridge.")
    p.set_defaults(runner=commands.completion)
    p.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete in")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="dra-bridge", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="`dra-bridge COMMAND --help` lists each command's flags, defaults, variables and exit codes.")
    parser.add_argument("--version", action="version", version=f"dra-bridge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_serve, _add_certs, _add_plan, _add_check, _add_audit, _add_classes, _add_reporter,
                _add_rollout, add_policy, _add_quota, _add_completion):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
    except InputError as exc:  # a DRA_BRIDGE_* variable that no flag accepts
        print(f"dra-bridge: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            from .servecli import run_serve
            setup_logging(args.log_format, args.log_level)
            return run_serve(args)
        if args.command == "certs":
            from .certscli import run_certs
            return run_certs(args)
        if args.command == "reporter":
            from .reportercli import run_reporter
            setup_logging(args.log_format)
            if not args.node_name:
                raise InputError("--node-name", "required (or set NODE_NAME)")
            return run_reporter(args)
        if getattr(args, "runner", None):  # set by its parser (commands.py)
            return args.runner(args)
    except ClusterUnreachable as exc:
        print(f"dra-bridge: error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (BridgeError, InputError, PolicyError) as exc:
        print(f"dra-bridge: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:
        if not _from_the_api(exc):
            raise
        from app.kube import last_target, unreachable
        print(f"dra-bridge: error: {unreachable(last_target(), exc)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return EXIT_BAD_INPUT


def _from_the_api(exc: Exception) -> bool:
    """A failure talking to the API server that no command turned into its own line."""
    return type(exc).__module__.startswith(("urllib3", "kubernetes")) or isinstance(exc, (TimeoutError,
                                                                                          ConnectionError))
