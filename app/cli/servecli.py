"""`dra-bridge serve`: the admission webhook over TLS, wired from its flags."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys

import uvicorn

from app import __version__, dra, kube
from app.common import BridgeError
from app.server import (DeadlineHttpProtocol, Metrics, PolicyHolder, ServiceState, create_app, create_health_app,
                        small_tls_buffers, tls)

from .inputs import load_inventory

log = logging.getLogger("dra_bridge")


def run_serve(args) -> int:
    metrics = Metrics()
    holder = PolicyHolder(args.policy, metrics)
    live = None
    if args.inventory == "live":
        inv = None
    else:
        inv = load_inventory(args.inventory)
    tls.ensure_dev_certs(args.tls_cert, args.tls_key)
    context = tls.server_context(args.client_ca)
    reloader = tls.CertReloader(context, args.tls_cert, args.tls_key, args.client_ca)
    if not reloader.check():
        raise BridgeError(f"--tls-cert/--tls-key: {reloader.last_error}")
    api = kube.api_client(args.kubeconfig)
    if api is None:
        if args.inventory == "live":
            raise BridgeError("--inventory live needs a Kubernetes API: run in-cluster or pass --kubeconfig")
        log.warning("no Kubernetes API configured: templates are kept in memory only (demo mode)")
    if args.inventory == "live":
        # Watches need their own client: long reads must not share the admission path's pool.
        live = kube.LiveInventory(kube.api_client(args.kubeconfig, timeout_retries=True), dra.LiveIndex).start()
    labels = kube.NamespaceLabels(api, timeout_s=args.api_timeout)
    state = ServiceState(
        policy=holder, templates=kube.TemplateStore(api, timeout_s=args.api_timeout,
                                                    namespace_allowed=_namespace_gate(args.template_namespace_label,
                                                                                      labels)),
        namespace_labels=labels, metrics=metrics,
        inventory=inv, certs=reloader, reload_interval_s=args.reload_interval, live=live,
        review_deadline_s=args.review_deadline)
    if live is None:
        state.index()  # build the device index before the first review, not during it
    if api is not None:
        _template_lifecycle(args, state)
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
                            limit_concurrency=args.max_connections, timeout_keep_alive=5)
    config.load()
    config.ssl = context  # ours: TLS 1.2+, strong ciphers, reloadable
    inventory_text = "live watch" if live is not None else f"{inv.source}, {inv.device_count} devices"
    log.info("dra-bridge %s listening on https://%s:%d (policy: %s; inventory: %s; kubernetes: %s)",
             __version__, args.host, args.port, args.policy or "bundled default", inventory_text,
             "connected" if api is not None else "none")
    servers = [uvicorn.Server(config)]
    if args.health_port:
        health = uvicorn.Config(create_health_app(state), host=args.host, port=args.health_port, log_config=None,
                                access_log=False, http=DeadlineHttpProtocol, limit_concurrency=64)
        servers.append(uvicorn.Server(health))
        log.info("health and metrics on http://%s:%d (/healthz, /readyz, /metrics)", args.host, args.health_port)
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


def _template_lifecycle(args, state: ServiceState) -> None:
    """Every replica forgets templates deleted by anyone; the lease holder collects unused ones."""
    metrics = state.metrics
    watch_api = kube.api_client(args.kubeconfig, timeout_retries=True)  # long reads: their own pool
    kube.TemplateWatch(watch_api, state.templates.forget, on_forgot=metrics.template_forgets.inc).start()
    if args.template_gc_grace <= 0:
        return
    namespace = os.environ.get("POD_NAMESPACE", "dra-bridge")
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    api = kube.api_client(args.kubeconfig, timeout_retries=True)
    # Renewed once a round: the lease outlives two rounds, so the holder keeps it between them.
    lease = kube.Lease(api, namespace, "dra-bridge-template-gc", identity,
                       duration_s=int(max(60, 2 * args.template_gc_interval)))
    kube.TemplateCollector(api, lease, grace_s=args.template_gc_grace, interval_s=args.template_gc_interval,
                           on_collected=metrics.templates_collected.inc,
                           on_leader=lambda held: metrics.template_gc_leader.set(1 if held else 0)).start()
    log.info("template collection: unreferenced templates deleted after %.0fs (lease %s/dra-bridge-template-gc as %s)",
             args.template_gc_grace, namespace, identity)
