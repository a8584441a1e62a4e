"""Command line: `dra-bridge serve | certs | plan | check | audit | reporter` (also `python -m app`,
`kubectl dra-bridge`): flags, logging, dispatch, and the one-line error every command ends with."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from app import __version__
from app.common import BridgeError, InputError, PolicyError

from .settings import ServeSettings, env

EXIT_BAD_INPUT = 2
log = logging.getLogger("dra_bridge")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record), "level": record.levelname.lower(),
                 "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(fmt: str, level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="run the admission webhook over TLS")
    d = ServeSettings()
    p.add_argument("--host", default=env("host", d.host))
    p.add_argument("--port", type=int, default=int(env("port", str(d.port))))
    p.add_argument("--tls-cert", default=env("tls_cert", d.tls_cert))
    p.add_argument("--tls-key", default=env("tls_key", d.tls_key))
    p.add_argument("--client-ca", default=env("client_ca"), help="require client certificates signed by this CA")
    p.add_argument("--policy", default=env("policy"), help="policy file (default: bundled policy)")
    p.add_argument("--inventory", default=env("inventory"), help="'live' or a file (default: bundled example)")
    p.add_argument("--kubeconfig", default=env("kubeconfig"))
    p.add_argument("--log-format", choices=["json", "text"], default=env("log_format", d.log_format))
    p.add_argument("--log-level", default=env("log_level", d.log_level))
    p.add_argument("--api-timeout", type=float, default=float(env("api_timeout", str(d.api_timeout_s))),
                   help="seconds for one Kubernetes API call")
    p.add_argument("--review-deadline", type=float, default=float(env("review_deadline", "4")),
                   help="seconds a review may take before the policy's onInternalError answers it "
                        "(keep below the webhooks' timeoutSeconds)")
    p.add_argument("--template-namespace-label",
                   default=env("template_namespace_label", "dra-bridge.io/migrate=enabled"),
                   help="write templates only in namespaces with this label (the webhooks' namespaceSelector); "
                        "'' for any")
    p.add_argument("--template-gc-grace", type=float, default=float(env("template_gc_grace", "0")),
                   help="delete generated templates no pod has named for this many seconds (one replica at a "
                        "time, by a Lease in $POD_NAMESPACE); 0: never")
    p.add_argument("--template-gc-interval", type=float, default=float(env("template_gc_interval", "300")),
                   help="seconds between template collection rounds")
    p.add_argument("--health-port", type=int, default=int(env("health_port", "0")),
                   help="also serve /healthz, /readyz and /metrics over plain HTTP on this port (0: off)")
    p.add_argument("--read-timeout", type=float, default=float(env("read_timeout", "10")),
                   help="seconds a client may take to send a request's headers, and then its body")
    p.add_argument("--max-connections", type=int, default=int(env("max_connections", "1000")),
                   help="open connections and requests in flight; more are answered 503")
    p.add_argument("--reload-interval", type=float, default=float(env("reload_interval", str(d.reload_interval_s))),
                   help="seconds between checks for rotated certificates and policy")


def _add_certs(sub) -> None:
    p = sub.add_parser("certs", help="create a CA and serving certificate for the webhook Service")
    p.add_argument("--service", default="dra-bridge")
    p.add_argument("--namespace", default="dra-bridge")
    p.add_argument("--out", default="certs")
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--host", action="append", default=[], help="extra DNS name or IP (repeatable)")
    p.add_argument("--inject", metavar="DIR", help="write the caBundle into webhook configurations under DIR")


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="offline migration of manifests")
    p.add_argument("-f", "--filename", action="append", required=True, help="file, folder or - (repeatable)")
    p.add_argument("--policy")
    p.add_argument("--inventory")
    p.add_argument("-n", "--namespace", default=None, help="namespace for objects that name none")
    p.add_argument("-o", "--output", choices=["yaml", "json", "diff"], default="yaml")


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="validate ResourceClaims/Templates against an inventory offline")
    p.add_argument("-f", "--filename", action="append", required=True, help="file, folder or - (repeatable)")
    p.add_argument("--inventory", help="ResourceSlices + DeviceClasses file (default: bundled example)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def _add_classes(sub) -> None:
    p = sub.add_parser("classes", help="DeviceClasses serving nvidia.com/gpu and MIG resources through DRA (native path)")
    p.add_argument("--inventory", help="ResourceSlices + DeviceClasses file (default: bundled example)")
    p.add_argument("--driver", default="gpu.nvidia.com", help="the DRA driver whose devices the classes select")


def _add_audit(sub) -> None:
    p = sub.add_parser("audit", help="list pods and workloads still on legacy GPU resources")
    p.add_argument("-f", "--filename", action="append", help="audit files instead of the cluster (repeatable)")
    p.add_argument("--kubeconfig", default=env("kubeconfig"))
    p.add_argument("--inventory", help="'live' or a file: check each migration against it")
    p.add_argument("--policy")
    p.add_argument("-o", "--output", choices=["table", "json", "policyreport"], default="table")


def _add_reporter(sub) -> None:
    p = sub.add_parser("reporter", help="publish this node's GPUs as ResourceSlices")
    p.add_argument("--backend", default=env("backend", "nvml"), help="'nvml' or 'fake:FILE' (GPU description YAML)")
    p.add_argument("--node-name", default=env("node_name", os.environ.get("NODE_NAME", "")),
                   help="this node (default: $NODE_NAME)")
    p.add_argument("--mode", choices=["publish", "shadow"], default=env("mode", "publish"))
    p.add_argument("--driver-name", default=env("driver_name"),
                   help="driver in published slices (default gpu.nvidia.com; shadow.gpu.dra-bridge.io in shadow)")
    p.add_argument("--interval", type=float, default=float(env("interval", "30")), help="seconds between refreshes")
    p.add_argument("--cleanup-on-exit", action="store_true", help="delete our slices on shutdown")
    p.add_argument("--shareable", action="store_true", default=env("shareable", "") == "true",
                   help="publish whole GPUs as shareable (allowMultipleAllocations with memory and "
                        "dra-bridge.io/cores capacities): for GPUs time-sliced or MPS-shared")
    p.add_argument("--partitionable", action="store_true", default=env("partitionable", "") == "true",
                   help="publish GPUs that list MIG profiles as NVIDIA's dynamic MIG does: the full GPU and "
                        "every possible MIG placement drawing on shared counters (Kubernetes 1.35+)")
    p.add_argument("--once", action="store_true", help="print the slices and exit")
    p.add_argument("--with-classes", action=argparse.BooleanOptionalAction, default=True,
                   help="with --once, also print the DeviceClasses the slices need (NVIDIA's gpu/mig classes)")
    p.add_argument("-o", "--output", choices=["yaml"], default="yaml")
    p.add_argument("--kubeconfig", default=env("kubeconfig"))
    p.add_argument("--health-port", type=int, default=int(env("health_port", "8081")), help="0 disables")
    p.add_argument("--max-rounds", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--log-format", choices=["json", "text"], default=env("log_format", "text"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dra-bridge", description=__doc__)
    parser.add_argument("--version", action="version", version=f"dra-bridge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_certs(sub)
    _add_plan(sub)
    _add_reporter(sub)
    _add_check(sub)
    _add_audit(sub)
    _add_classes(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        if args.command == "audit":
            from .auditcli import run_audit
            return run_audit(args)
        if args.command == "check":
            from .checkcli import run_check
            return run_check(args)
        if args.command == "classes":
            from .classescli import run_classes
            return run_classes(args)
        if args.command == "plan":
            from .plancli import run_plan
            return run_plan(args)
    except (BridgeError, InputError, PolicyError) as exc:
        print(f"dra-bridge: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return EXIT_BAD_INPUT
