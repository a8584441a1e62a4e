"""The reporter loop: read this node's GPUs, publish them as ResourceSlices, repeat; health and metrics."""

from __future__ import annotations

import logging
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from . import render
from .backends import Backend, BackendError
from .publish import PublishError, SlicePublisher

log = logging.getLogger("dra_bridge.reporter")
SHADOW_DRIVER = "shadow.gpu.dra-bridge.io"
EXIT_CONFLICT = 6  # publish mode beside NVIDIA's own kubelet plugin


class ReporterMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.gpus = Gauge("dra_bridge_reporter_gpus", "GPUs seen on this node", ["health"], registry=self.registry)
        self.devices = Gauge("dra_bridge_reporter_devices", "Devices published", registry=self.registry)
        self.errors = Counter("dra_bridge_reporter_publish_errors_total", "Failed publish rounds",
                              registry=self.registry)
        self.last_publish = Gauge("dra_bridge_reporter_last_publish_timestamp_seconds",
                                  "Unix time of the last successful publish", registry=self.registry)
        self.generation = Gauge("dra_bridge_reporter_pool_generation", "Pool generation published",
                                registry=self.registry)
        self.dropped = Counter("dra_bridge_reporter_dropped_fields_total", "Fields the API server dropped from "
                               "slices we wrote (their DRA feature gate is off there)", ["gate"],
                               registry=self.registry)


def _health_server(port: int, metrics: ReporterMetrics, state: dict) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/metrics":
                body, status, kind = generate_latest(metrics.registry), 200, "text/plain; version=0.0.4"
            elif self.path == "/healthz":
                ok = state.get("healthy", False)
                body, status, kind = (b"ok" if ok else state.get("error", "starting").encode()), \
                    200 if ok else 503, "text/plain"
            else:
                body, status, kind = b"not found", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def driver_for_mode(mode: str, driver_name: str | None) -> tuple[str, bool]:
    """(driver name, qualify attribute names) for `publish` or `shadow` mode."""
    if mode == "shadow":
        # No DeviceClass selects this driver, so the scheduler never allocates from it; the
        # attributes still carry NVIDIA's domain, so selectors written for it evaluate the same.
        return driver_name or SHADOW_DRIVER, True
    return driver_name or render.NVIDIA_DOMAIN, False


def render_style(args) -> dict:
    """render.slices keywords for the reporter's flags and mode."""
    _driver, qualify = driver_for_mode(args.mode, args.driver_name)
    return {"qualify": qualify, "shareable": args.shareable, "partitionable": args.partitionable,
            "shadow_of": render.NVIDIA_DOMAIN if args.mode == "shadow" else None,
            "release": getattr(args, "release", None)}


def run_loop(api, backend: Backend, args) -> int:  # args: the `reporter` command's flags
    """Publish every `args.interval` seconds until SIGTERM/SIGINT (or `args.max_rounds`)."""
    driver, _qualify = driver_for_mode(args.mode, args.driver_name)
    metrics = ReporterMetrics()
    state: dict = {}
    server = _health_server(args.health_port, metrics, state) if args.health_port else None
    publisher = SlicePublisher(api, args.node_name, driver, render_style(args))
    if args.mode == "publish":
        theirs = publisher.foreign()
        if theirs:
            raise BackendError(f"NVIDIA's DRA driver already publishes {driver} slices for node {args.node_name} "
                               f"({', '.join(theirs[:3])}): run the reporter with --mode=shadow beside it", EXIT_CONFLICT)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("reporter for node %s publishing as driver %s every %.0fs, for %s", args.node_name, driver,
             args.interval, publisher.release.describe())
    for note in render.for_release(publisher.release, args.shareable, args.partitionable)[2]:
        log.warning("%s", note)
    rounds = 0
    failed = False
    while not stop.is_set():
        failed = False
        try:
            node = backend.read()
            healthy = sum(g.healthy for g in node.gpus)
            metrics.gpus.labels("healthy").set(healthy)
            metrics.gpus.labels("unhealthy").set(len(node.gpus) - healthy)
            result = publisher.publish(node)
            for lost in result.dropped:
                metrics.dropped.labels(lost.gate).inc()
            metrics.devices.set(result.devices)
            metrics.generation.set(result.generation)
            metrics.last_publish.set(time.time())
            state.update(healthy=True, error=None)
            if not result.unchanged:
                log.info("published generation %d (created %d, updated %d, deleted %d)", result.generation,
                         result.created, result.updated, result.deleted)
        except (PublishError, BackendError) as exc:
            metrics.errors.inc()
            state.update(healthy=False, error=str(exc))
            log.error("publish failed: %s", exc)
            failed = True
        rounds += 1
        if args.max_rounds and rounds >= args.max_rounds:
            break
        stop.wait(args.interval)
    if args.cleanup_on_exit:
        try:
            log.info("removed %d slices on shutdown", publisher.remove_all())
        except PublishError as exc:
            log.error("cleanup failed: %s", exc)
    if server:
        server.shutdown()
    # A fixed number of rounds is a one-shot run: its last round's failure is the exit status.
    return 1 if args.max_rounds and failed else 0
