"""`dra-bridge serve`: the admission webhook over TLS, wired from its flags."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import gc
import logging
import os
import signal
import socket
import sys
import time

import urllib3
import uvicorn

from app import certs
from app import __version__, dra, kube
from app.common import BridgeError, ClusterUnreachable, InputError
from app.migration import OptIn, kueue_view_of
from app.policy import vap_changes
from app.server import (BudgetWatch, DeadlineHttpProtocol, GpuPriorityWatch, KueueWatch, Metrics, PolicyHolder,
                        QueueBudgetWatch, ServiceState, UnmigratedCount, create_app, create_health_app,
                        small_tls_buffers, tls)

from .inputs import choose_inventory, flag_release
from .servedpolicy import configmap_name

log = logging.getLogger("dra_bridge")
# Idle review connections stay open longer than the API server keeps them (Go's 90 s idle
# timeout), so it is always the API server that closes one: had we closed it as an admission POST
# went out, that POST would fail, and the API server does not retry it (kubernetes#127335), so
# the pod would be admitted unmigrated. Connections that never send a request close at the
# header deadline (DeadlineHttpProtocol).
KEEP_ALIVE_S = 120


def _configmap(text: str) -> tuple[str, str] | None:
    return configmap_name(text) if text else None


def _cluster_release(args, api):
    """The release the API server runs and the DRA gates a dry run shows there (those it may not
    probe keep the release's defaults, said); its defaults, said, when /version cannot be read."""
    try:
        release, unprobed = kube.probed_release(api, flag_release(args, kube.server_release(api)))
    except (ClusterUnreachable, OSError, urllib3.exceptions.HTTPError) as exc:
        release = flag_release(args)
        log.warning("the API server's release is not known (%s): judging and writing for %s until restarted",
                    exc, release.describe())
        return release
    for why in unprobed:
        log.info("DRA gates not probed by a dry run (%s): %s's defaults assumed for them", why, release.version)
    return release


def _deployed_policy(args, metrics: Metrics, configmap: tuple[str, str], api) -> PolicyHolder:
    """The policy of a deployed replica: Events on its ConfigMap, and each policy taken kept beside
    it, so a restart with a refused file starts on the last good one instead of crashing."""
    if api is None:
        return PolicyHolder(args.policy, metrics, optional=args.policy_optional)
    events = kube.EventSink(api, *configmap, instance=os.environ.get("POD_NAME") or socket.gethostname())
    return PolicyHolder(args.policy, metrics, events, optional=args.policy_optional,
                        last_good=kube.LastGoodPolicy(api, *configmap, timeout_s=args.api_timeout))


def _count_dropped(metrics):
    def count(gates: list[str]) -> None:
        for gate in gates:
            metrics.dropped_fields.labels("ResourceClaimTemplate", gate).inc()
    return count


def run_serve(args) -> int:
    # Ports first: a port in use is said before seconds of inventory loading, not after.
    _check_port(args.host, args.port, "--port", "DRA_BRIDGE_PORT")
    if args.health_port:
        _check_port(args.host, args.health_port, "--health-port", "DRA_BRIDGE_HEALTH_PORT")
    metrics = Metrics()
    configmap = _configmap(args.policy_configmap)
    # Without the policy's ConfigMap (a local run) a refused file stops here, before anything else.
    holder = PolicyHolder(args.policy, metrics, optional=args.policy_optional) if not configmap else None
    live = None
    if args.demo and (args.kubeconfig or args.context or args.inventory):
        raise InputError("--demo", "serves the bundled example inventory with no Kubernetes API: leave out "
                                   "--kubeconfig, --context and --inventory")
    # A file (or the example) is read first: a bad one is said before certificates and the cluster.
    inv, where = choose_inventory(args.inventory, args=args) if args.inventory not in (None, "live") else (None, "")
    _dev_certs(args.tls_cert, args.tls_key)
    context = tls.server_context(args.client_ca)
    reloader = tls.CertReloader(context, args.tls_cert, args.tls_key, args.client_ca)
    if not reloader.check():
        raise BridgeError(f"--tls-cert/--tls-key: {reloader.last_error}")
    found = None if args.demo else kube.connect(args.kubeconfig, args.context, ambient=False)
    api, api_down = (found[0] if found else None), None
    if api is None:
        if args.inventory == "live":
            raise BridgeError("--inventory live needs a Kubernetes API: run in-cluster or pass --kubeconfig")
        lying = kube.kubeconfig_paths(None)
        log.warning("demo mode: %s: templates are kept in memory, nothing is written anywhere%s",
                    "--demo" if args.demo else "no --kubeconfig, --context or in-cluster account",
                    f" ({lying} is not used unless named: --kubeconfig {lying})" if lying and not args.demo else "")
    else:
        log.info("kubernetes API: %s: generated ResourceClaimTemplates are created there", found[1])
        api_down = kube.probe(api)
        if api_down:
            log.warning("kubernetes API at %s does not answer (%s): serving anyway; pods that need a new "
                        "template are refused or admitted unmigrated (policy onTemplateError) until it does", found[1].server, api_down)
    # Unsaid, serve judges the cluster it acts on; only demo mode judges the bundled example.
    chosen = args.inventory or ("live" if api is not None else "example")
    if inv is None and chosen == "example":
        inv, where = choose_inventory(chosen, args=args)
    release = _cluster_release(args, api) if api is not None and not api_down else \
        (inv.release if inv is not None else flag_release(args))
    if chosen == "live":
        # Watches need their own client: long reads must not share the admission path's pool.
        live = kube.LiveInventory(_own_client(args), functools.partial(dra.LiveIndex, release=release)).start()
    elif inv.device_count == 0:
        log.warning("inventory %s holds no devices: every claim is judged 'never' and no pod takes the native "
                    "path (expected ResourceSlices, as `kubectl get resourceslices,deviceclasses -o yaml` prints)",
                    inv.source)
    labels = kube.NamespaceLabels(api, timeout_s=args.api_timeout)
    if configmap:
        holder = _deployed_policy(args, metrics, configmap, api)
    state = ServiceState(
        policy=holder, templates=kube.TemplateStore(api, timeout_s=args.api_timeout,
                                                    namespace_allowed=_namespace_gate(args.template_namespace_label,
                                                                                      labels),
                                                    on_create=metrics.templates_created.inc,
                                                    on_dropped=_count_dropped(metrics)),
        namespace_labels=labels, metrics=metrics, claims=kube.ClaimReader(api, timeout_s=args.api_timeout),
        inventory=inv, certs=reloader, reload_interval_s=args.reload_interval, live=live,
        review_deadline_s=args.review_deadline)
    if live is None:
        state.index()  # build the device index before the first review, not during it
    if args.admission_policies == "sync":
        if api is None:
            raise InputError("--admission-policies", "sync writes to a Kubernetes API: pass --kubeconfig or run in-cluster")
        _admission_policy_sync(args, holder, metrics, api)
    if api is not None:
        _template_lifecycle(args, state)
        _background_rounds(args, state)
        _kueue_rounds(state, api)
    # Reviews run in worker threads; a short GIL switch interval keeps the event loop (health
    # probes, other reviews' IO) answering within milliseconds while one of them computes.
    sys.setswitchinterval(0.001)
    # What exists now lives as long as the process: exempt it from collections, and collect
    # less often, so a large review's many short-lived objects do not trigger full passes that
    # hold the interpreter (the event loop) for tens of milliseconds.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)
    DeadlineHttpProtocol.header_timeout_s = DeadlineHttpProtocol.body_timeout_s = args.read_timeout
    DeadlineHttpProtocol.max_connections = args.max_connections
    small_tls_buffers()
    config = uvicorn.Config(create_app(state), host=args.host, port=args.port, log_config=None,
                            access_log=False, ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
                            timeout_graceful_shutdown=10, http=DeadlineHttpProtocol,
                            limit_concurrency=args.max_connections, timeout_keep_alive=KEEP_ALIVE_S)
    config.load()
    config.ssl = context  # ours: TLS 1.2+, strong ciphers, reloadable
    inventory_text = "live watch of the cluster" if live is not None else f"{where}, {inv.device_count} devices"
    servers = [_Started(config, lambda address: log.info(
        "dra-bridge %s listening on https://%s (policy: %s; inventory: %s; kubernetes: %s; judged for %s)",
        __version__, address, args.policy or "bundled default", inventory_text,
        "none (demo mode)" if api is None else "unreachable at start" if api_down else "reachable",
        release.describe()),
        args.drain_seconds, state, min(args.drain_min_seconds, args.drain_seconds))]
    if args.health_port:
        health = uvicorn.Config(create_health_app(state), host=args.host, port=args.health_port, log_config=None,
                                access_log=False, http=DeadlineHttpProtocol, limit_concurrency=64)
        servers.append(_Started(health, lambda address: log.info(
            "health and metrics on http://%s (/healthz, /readyz, /metrics)", address)))
    # uvicorn drains on SIGTERM, then re-raises it on the handler it found: ignoring it there
    # makes a drained shutdown exit 0, as kubelet expects of a clean stop.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if len(servers) == 1:
        servers[0].run()
    else:
        asyncio.run(_serve_all(servers))
    log.info("drained and stopped")
    return 0


def _namespace_gate(label: str, labels):
    """`KEY=VALUE`: templates only in namespaces carrying that label; "" for anywhere."""
    if not label:
        return None
    key, sep, value = label.partition("=")
    if not sep or not key:
        raise BridgeError(f"--template-namespace-label: expected KEY=VALUE, got {label!r}")

    def allowed(namespace: str) -> bool:
        try:
            return labels.get(namespace).get(key) == value
        except kube.NamespaceLookupError:
            return False  # unknown: no write; the pod is admitted unmigrated (onTemplateError)
    return allowed


class _Started(uvicorn.Server):
    """Says where it listens once it does: the address really bound (the port of `--port 0`).

    With a drain window, SIGTERM does not stop it at once: readiness goes false, every answer
    carries `Connection: close`, and it stops once no connection is left open (each was closed by
    the API server, after an answer or when idle) and the endpoints have had `min_s` to drop it
    (a connection balanced here meanwhile finds it listening), or once the window ends. Closing a connection the
    API server may be reusing would fail that admission POST, which is not retried
    (kubernetes#127335): the pod would be admitted unmigrated. A second SIGTERM, or SIGINT, stops
    at once."""

    def __init__(self, config, on_started, drain_s: float = 0.0, state: ServiceState | None = None,
                 min_s: float = 0.0):
        super().__init__(config)
        self.on_started = on_started
        self.drain_s, self.min_s, self.state, self.drain_until, self.drain_from = drain_s, min_s, state, None, None

    def handle_exit(self, sig, frame) -> None:
        if sig == signal.SIGTERM and self.drain_s > 0 and self.drain_until is None and self.state is not None:
            self.drain_from = time.monotonic() + self.min_s
            self.drain_until = time.monotonic() + self.drain_s
            self.state.draining = True
            log.info("SIGTERM: draining: not ready, every answer closes its connection; stopping once the %d open "
                     "connection(s) are closed, at most %.0fs", len(self.server_state.connections), self.drain_s)
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.drain_until is not None and not self.should_exit:
            left, now = len(self.server_state.connections), time.monotonic()
            if (not left and now >= self.drain_from) or now >= self.drain_until:
                log.info("drained: %s", "no connection left open" if not left else
                         f"{left} connection(s) still open after {self.drain_s:.0f}s")
                self.should_exit = True
        return await super().on_tick(counter)

    async def shutdown(self, sockets=None) -> None:
        # Connections still idle when it stops (the window ended) are dropped at once. uvicorn
        # closes them gracefully, and a graceful TLS close waits for the peer's close_notify:
        # behind a balancer an idle client sent none, and the stop waited uvicorn's whole
        # timeout_graceful_shutdown (10 s) for nothing. One mid-answer still finishes it.
        for connection in list(self.server_state.connections):
            cycle = getattr(connection, "cycle", None)
            if cycle is None or cycle.response_complete:
                connection.transport.abort()
        await super().shutdown(sockets)

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.on_started(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")


def _check_port(host: str, port: int, flag: str, variable: str) -> None:
    """A port in use is one line naming the flag and its variable, not uvicorn's log and exit 1."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise BridgeError(f"{flag} {port} ({variable}): address {host}:{port} already in use: stop what "
                                  "listens there or choose another port") from exc
            raise BridgeError(f"{flag} {port} ({variable}): cannot listen on {host}:{port}: {exc.strerror}") from exc


def _dev_certs(cert: str, key: str) -> None:
    """Development certificates when both files are absent; a folder we cannot write (an image
    with no certificate mounted) is one line saying what to pass instead."""
    try:
        certs.ensure_dev_certs(cert, key)
    except OSError as exc:
        folder = os.path.dirname(cert) or "."
        raise BridgeError(f"--tls-cert/--tls-key: {cert} and {key} do not exist and development certificates "
                          f"cannot be written to {folder}/ ({exc.strerror or exc}): mount a certificate and pass "
                          "--tls-cert/--tls-key (DRA_BRIDGE_TLS_CERT/_KEY), or start where that folder is "
                          "writable") from exc


async def _serve_all(servers: list) -> None:
    """The review server owns the signals; the health server stops when it does."""
    review, *others = servers
    for other in others:
        other.install_signal_handlers = lambda: None  # older uvicorn; newer ones capture in serve()
        other.capture_signals = contextlib.nullcontext
    tasks = [asyncio.create_task(s.serve()) for s in others]
    try:
        await review.serve()
    finally:
        for s in others:
            s.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


def _background_rounds(args, state: ServiceState) -> None:
    """Every --unmigrated-interval: pods the webhook never saw (a review lost to failurePolicy
    Ignore), counted per namespace; with the live inventory, GPU budgets (quotas, Kueue queues)
    claims escape."""
    if args.unmigrated_interval <= 0:
        return
    opt_in = OptIn.parse(args.template_namespace_label, "--template-namespace-label")
    api = _own_client(args)  # long lists: their own pool
    UnmigratedCount(state, lambda: kube.opted_in_pods(api, str(opt_in) if opt_in else None), opt_in,
                    args.unmigrated_interval).start()
    if state.live is not None:  # quotas and claims come from its watch: no read of its own
        BudgetWatch(state, args.unmigrated_interval).start()
        QueueBudgetWatch(state, lambda: kube.read_queues(api), args.unmigrated_interval).start()


def _kueue_rounds(state: ServiceState, api) -> None:
    """Kueue's configuration and the priorities GPU pods run at, for the path choice: read at
    once, then every minute."""
    KueueWatch(state, lambda: kueue_view_of(kube.read_kueue(api))).start()
    GpuPriorityWatch(state, lambda: kube.running_pods(api)).start()


def _template_lifecycle(args, state: ServiceState) -> None:
    """Every replica knows our templates from a list and watch; the lease holder collects unused ones."""
    metrics = state.metrics
    watch_api = _own_client(args)  # long reads: their own pool
    state.template_watch = kube.TemplateWatch(watch_api, state.templates,
                                              on_forgot=metrics.template_forgets.inc).start()
    if args.template_gc_grace <= 0:
        return
    namespace = os.environ.get("POD_NAMESPACE", "dra-bridge")
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    api = _own_client(args)
    # Renewed once a round: the lease outlives two rounds, so the holder keeps it between them.
    lease = kube.Lease(api, namespace, "dra-bridge-template-gc", identity,
                       duration_s=int(max(60, 2 * args.template_gc_interval)))
    kube.TemplateCollector(api, lease, grace_s=args.template_gc_grace, interval_s=args.template_gc_interval,
                           on_collected=metrics.templates_collected.inc,
                           on_leader=lambda held: metrics.template_gc_leader.set(1 if held else 0)).start()
    log.info("template collection: unreferenced templates deleted after %.0fs (lease %s/dra-bridge-template-gc as %s)",
             args.template_gc_grace, namespace, identity)


def _admission_policy_sync(args, holder: PolicyHolder, metrics: Metrics, api) -> None:
    """The lease holder keeps the compiled ValidatingAdmissionPolicies in step with the policy in force."""
    namespace = os.environ.get("POD_NAMESPACE", "dra-bridge")
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    lease = kube.Lease(api, namespace, "dra-bridge-admission-policies", identity, duration_s=60)
    holder.vap_sync = kube.AdmissionPolicySync(
        api, lease, lambda: (holder.digest, holder.vap_objects), vap_changes, interval_s=max(5.0, 3 * args.reload_interval),
        on_round=lambda ok: metrics.admission_policies_failing.set(0 if ok else 1)).start()
    log.info("compiled admission policies: kept in step with the policy in force (lease %s/dra-bridge-admission-"
             "policies as %s)", namespace, identity)


def _own_client(args):
    """Another client to the API serve chose (its own connection pool: long reads, leases)."""
    return kube.connect(args.kubeconfig, args.context, True, ambient=False)[0]
