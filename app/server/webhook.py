"""FastAPI app factory: HTTP in, pure decisions, HTTP out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from app.common import InputError, TemplateEnsureError

from . import admission, mutation, validation
from .service import ServiceState

log = logging.getLogger("dra_bridge.webhook")
MAX_BODY = 3 * 1024 * 1024


class BodyTooLarge(Exception):
    pass


def _json(payload: object, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(state: ServiceState) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        state.tick()
        task = asyncio.create_task(_background(state))
        try:
            yield
        finally:
            task.cancel()

    app = FastAPI(title="dra-bridge", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.service = state
    metrics = state.metrics

    def review_endpoint(endpoint: str, handler):
        async def endpoint_fn(request: Request) -> Response:
            started = time.perf_counter()
            kind, outcome = "", "error"
            try:
                try:
                    req = admission.parse_review(await read_body(request))
                except BodyTooLarge:
                    outcome = "too_large"
                    return _json({"error": f"request body exceeds {MAX_BODY} bytes"}, 413)
                except InputError as exc:
                    outcome = "bad_request"
                    return _json({"error": str(exc), "field": exc.field}, 400)
                kind = req.kind
                try:
                    review, outcome = await handler(state, req)
                except Exception:  # a bug must not block admission: fail open, loudly
                    log.exception("%s failed for %s/%s uid=%s", endpoint, req.namespace, req.name, req.uid)
                    review = admission.response(req.uid, True, warnings=["internal error; admitted unchanged"])
                return _json(review)
            finally:
                metrics.requests.labels(endpoint, kind, outcome).inc()
                metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

        app.post(f"/{endpoint}")(endpoint_fn)

    review_endpoint("mutate", _mutate)
    review_endpoint("validate", _validate)

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        ready, checks = state.readiness()
        body = {"ready": ready, "checks": checks}
        detail = state.detail()
        if detail:
            body["detail"] = detail  # a usable inventory with some devices left out stays ready
        return _json(body, 200 if ready else 503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    return app


async def _namespace_labels(state: ServiceState, policy, req: admission.Request) -> dict[str, str]:
    """Only policies with namespace selectors need labels; the lookup is IO, off the event loop."""
    if policy.needs_namespace_labels and req.namespace:
        return await run_in_threadpool(state.namespace_labels.get, req.namespace)
    return {}


async def _mutate(state: ServiceState, req: admission.Request) -> tuple[dict, str]:
    policy = state.policy.policy
    mp = mutation.plan_request(req, policy, await _namespace_labels(state, policy, req))
    outcome = mp.outcome
    error = None
    # dryRun: no write, and the answer is the one a successful write would give.
    pending = [] if req.dry_run else [t for t in mp.templates if not state.templates.cached(t)]
    if pending:
        state.metrics.templates_created.inc(len(pending))
        try:
            await run_in_threadpool(_ensure_all, state, pending)
        except TemplateEnsureError as exc:
            error, outcome = str(exc), "template_error"
            state.metrics.template_errors.inc()
            log.warning("template ensure failed for pod %s/%s: %s", req.namespace, req.name, exc)
    review = mutation.respond(mp, error)
    if not review["response"]["allowed"]:
        outcome = "denied"
    if mp.settings is not None and not req.dry_run:  # a dry run leaves no trace beyond its answer
        state.metrics.migrations.labels(outcome).inc()
        log.info("mutate %s/%s uid=%s outcome=%s dryRun=%s", req.namespace, req.name or "(generated)",
                 req.uid, outcome, req.dry_run)
    return review, outcome


async def _validate(state: ServiceState, req: admission.Request) -> tuple[dict, str]:
    if not validation.applies(req):
        return admission.response(req.uid, True), "skipped"
    policy = state.policy.policy
    labels = None
    if req.kind != "Pod" and req.namespace and validation.asks_admin_access(req.obj):
        labels = await run_in_threadpool(state.namespace_labels.get, req.namespace)
    settings = policy.for_namespace(req.namespace, labels if labels is not None else
                                    await _namespace_labels(state, policy, req))
    if req.kind == "Pod":
        outcome = validation.evaluate_pod(req.obj, settings, policy)
    else:
        outcome = validation.evaluate_claim(req.obj, settings, state.index(), req.namespace, labels)
        if not state.readiness()[1]["inventory"]:
            # A verdict against a stale or unsynced inventory is advice, never a denial.
            settings = settings.model_copy(update={"mode": "warn"})
            outcome.findings.insert(0, validation.Finding(
                "warning", "device inventory is not synced; this verdict may be stale and is not enforced"))
    review = validation.respond(req, outcome, settings)
    result = "denied" if not review["response"]["allowed"] else ("violation" if outcome.violations else "allowed")
    if not req.dry_run:  # a dry run leaves no trace beyond its answer
        state.metrics.validations.labels(req.kind, result, settings.mode).inc()
        if outcome.violations:
            log.info("validate %s %s/%s uid=%s mode=%s result=%s: %s", req.kind, req.namespace, req.name, req.uid,
                     settings.mode, result, "; ".join(outcome.violations)[:500])
    return review, result


def _ensure_all(state: ServiceState, templates: list[dict]) -> None:
    for template in templates:
        state.templates.ensure(template)


async def _background(state: ServiceState) -> None:
    while True:
        await asyncio.sleep(state.reload_interval_s)
        try:
            state.tick()
        except Exception:  # keep reloading even if one round fails
            log.exception("background check failed")
