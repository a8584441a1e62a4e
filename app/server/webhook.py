"""FastAPI app factory: HTTP in, pure decisions, HTTP out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from app.common import DeadlineExceeded, InputError, TemplateEnsureError, deadline
from app.kube import NamespaceLookupError, TemplateConflict

from app.application import Decision, Finding, Outcome, asks_admin_access, evaluate_claim, evaluate_pod, shape_key, \
    subject_of, unfinished_decision

from . import admission, decisions, mutation, validation
from .policyreview import review_policy
from .metrics import metrics_kind
from .service import ServiceState

log = logging.getLogger("dra_bridge.webhook")
MAX_BODY = 3 * 1024 * 1024
KNOWN_BODY_LIMIT = 64 * 1024  # decided on the event loop only when parsing it is quick
ROUTINE_OUTCOMES = frozenset(o.metric for o in Outcome if o.routine)


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
    app.add_middleware(CloseWhileDraining, state=state)
    metrics = state.metrics

    def review_endpoint(endpoint: str, handler):
        async def endpoint_fn(request: Request) -> Response:
            arrived = time.monotonic()
            try:
                body = await read_body(request)
            except BodyTooLarge:
                metrics.requests.labels(endpoint, "", "too_large").inc()
                # Close rather than drain: the rest of a huge body is never read.
                response = _json({"error": f"request body exceeds {MAX_BODY} bytes"}, 413)
                response.headers["Connection"] = "close"
                return response
            except ClientDisconnect:
                metrics.requests.labels(endpoint, "", "client_disconnected").inc()
                log.info("%s: client disconnected before sending the whole request", endpoint)
                return Response(status_code=400)  # nobody is left to read it
            # Parsing and deciding are CPU work: off the event loop, under the review deadline.
            loop = asyncio.get_running_loop()
            known = _known_mutation(state, body) if endpoint == "mutate" else None
            if known is not None:  # a replica of a shape already decided: no worker hand-off
                status, payload, kind, outcome = 200, *known
            else:
                status, payload, kind, outcome = await loop.run_in_executor(
                    state.executors[endpoint], _review, state, endpoint, handler, body, arrived)
            if isinstance(payload, _Pending):  # waits on the loop, holding no worker
                failure = await _templates_ready(state, payload, arrived)
                payload, outcome = _answer_mutate(state, payload.req, payload.plan, failure)
            metrics.requests.labels(endpoint, metrics_kind(kind), outcome).inc()
            metrics.latency.labels(endpoint).observe(time.monotonic() - arrived)
            return _json(payload, status)

        app.post(f"/{endpoint}")(endpoint_fn)

    review_endpoint("mutate", _mutate)
    review_endpoint("validate", _validate)
    review_endpoint("validate-policy", lambda _state, req: review_policy(req))

    _probes(app, state)
    return app


class CloseWhileDraining:
    """While the replica drains (SIGTERM), every answer says `Connection: close`: its client opens
    the next connection elsewhere, and no connection is closed under a request it is sending."""

    def __init__(self, app, state: ServiceState):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.state.draining:
            await self.app(scope, receive, send)
            return

        async def closing(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)
        await self.app(scope, receive, closing)


def _probes(app: FastAPI, state: ServiceState) -> None:
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
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")


def create_health_app(state: ServiceState) -> FastAPI:
    """/healthz, /readyz and /metrics on a plain port of their own: kubelet probes and scrapers
    keep working when the review port requires client certificates; reviews are not served here."""
    app = FastAPI(title="dra-bridge health", docs_url=None, redoc_url=None, openapi_url=None)
    _probes(app, state)
    return app


def _review(state: ServiceState, endpoint: str, handler, body: bytes, arrived: float):
    """One review in a worker thread: (HTTP status, body, kind, outcome). The deadline counts
    from arrival, so a review that waited for a worker has less time, never more."""
    left = state.review_deadline_s - (time.monotonic() - arrived)
    with deadline.limit(max(left, 0.0)):
        try:
            req = admission.parse_review(body)
        except InputError as exc:
            return 400, {"error": str(exc), "field": exc.field}, "", "bad_request"
        try:
            review, outcome = handler(state, req)
        except Exception as exc:  # noqa: BLE001 - answered by policy, counted and logged, never silent
            review, outcome = _unfinished(state, endpoint, req, exc)
    return 200, review, req.kind, outcome


def _unfinished(state: ServiceState, endpoint: str, req: admission.Request, exc: Exception) -> tuple[dict, str]:
    """A review that could not finish: the policy's onInternalError decides (validation: deny in
    enforce namespaces; mutation: admit unmigrated), with a metric and a log line."""
    reason = "deadline" if isinstance(exc, DeadlineExceeded) else (
        "namespace_unknown" if isinstance(exc, NamespaceLookupError) else "internal_error")
    state.metrics.internal_errors.labels(endpoint, reason).inc()
    policy = state.policy.policy
    settings = None
    if reason != "namespace_unknown":
        try:
            settings = _settings(state, policy, req)
        except Exception:  # noqa: BLE001 - which policy applies is unknown: the failure rule decides
            settings = None
    why = {"deadline": f"the review ran past its time limit ({state.review_deadline_s:g} s)",
           "namespace_unknown": str(exc), "internal_error": f"internal error ({type(exc).__name__})"}[reason]
    if reason == "internal_error":
        log.error("%s failed for %s %s/%s uid=%s", endpoint, _safe(req.kind), _safe(req.namespace), _safe(req.name),
                  _safe(req.uid), exc_info=exc)
    else:
        log.warning("%s not finished for %s %s/%s uid=%s: %s", endpoint, _safe(req.kind), _safe(req.namespace),
                    _safe(req.name), _safe(req.uid), why)
    if endpoint == "validate-policy":
        deny = True  # a policy nobody could judge does not land (its webhook fails closed too)
    elif endpoint == "validate":
        deny = unfinished_decision(settings) == "deny"
    else:
        deny = (settings or policy.defaults).onInternalError == "deny"
    if deny:
        return admission.response(req.uid, False, code=500, message=f"dra-bridge: {endpoint} not finished: {why}"), \
            f"{reason}_denied"
    text = "admitted unmigrated" if endpoint == "mutate" else "admitted unvalidated"
    return admission.response(req.uid, True, warnings=[f"{text}: {why}"]), f"{reason}_allowed"


def _safe(text: str) -> str:
    """Request strings in log lines: escaped, so a forged uid cannot write lines of its own."""
    return repr(text)[1:-1][:256] if isinstance(text, str) else "?"


def _settings(state: ServiceState, policy, req: admission.Request, labels: dict | None = None):
    """Settings for the request's namespace; NamespaceLookupError when they depend on labels
    nobody could read (then the failure rule decides, not a guess)."""
    if labels is None and policy.needs_namespace_labels and req.namespace:
        labels = state.namespace_labels.get(req.namespace)
    return policy.for_namespace(req.namespace, labels or {})


@dataclass
class _Pending:
    """A /mutate review whose templates are being created: answered once they exist."""
    req: admission.Request
    plan: Decision
    futures: list


def _mutate(state: ServiceState, req: admission.Request) -> tuple[dict | _Pending, str]:
    policy = state.policy.policy
    try:
        labels = {}
        wanted = policy.needs_namespace_labels or policy.rules
        if req.kind == "Pod" and req.operation == "CREATE" and wanted and req.namespace:
            labels = state.namespace_labels.get(req.namespace)
        facts = state.path_facts()
        judged, noted = decisions.recording(facts)
        decision = mutation.plan_request(req, policy, labels, facts=state.cluster_facts(judged))
    except Exception as exc:  # noqa: BLE001 - planning bugs and deadlines: the failure rule decides
        return _unfinished(state, "mutate", req, exc)
    if req.kind == "Pod" and req.operation == "CREATE" and isinstance(req.obj, dict) \
            and not policy.needs_namespace_labels and not policy.rules:  # rules read labels, users
        key = shape_key(req.obj, req.namespace or None)
        if key is not None:  # filed under the facts it was decided with
            state.decisions.put(key, policy, facts, decision, noted)
    return _after_plan(state, req, decision)


def _known_mutation(state: ServiceState, body: bytes) -> tuple | None:
    """(review, kind, outcome) for a pod whose shape was decided under the policy and facts in
    force, on the event loop (a lookup: small bodies only); None: a worker decides. Each pod
    review is counted by why (dra_bridge_fast_path_total)."""
    policy = state.policy.policy
    if len(body) > KNOWN_BODY_LIMIT or policy.needs_namespace_labels or policy.rules:
        return None
    try:
        req = admission.parse_review(body)
    except InputError:
        return None  # the worker answers it, as any malformed review
    if req.kind != "Pod" or req.operation != "CREATE" or not isinstance(req.obj, dict):
        return None
    known, facts = state.known_path_facts()
    key = shape_key(req.obj, req.namespace or None) if known else None
    decision, why = state.decisions.get(key, policy, facts) if key is not None else \
        (None, "facts" if not known else "unseen")
    state.metrics.fast_path.labels(why).inc()
    if decision is None:
        return None
    review, outcome = _after_plan(state, req, decision)
    return review, req.kind, outcome


def _after_plan(state: ServiceState, req: admission.Request, mp: Decision) -> tuple[dict | _Pending, str]:
    # dryRun: no write, and the answer is the one a successful write would give.
    for template in mp.templates:  # /validate of this pod counts them before the API has them
        state.claims.remember(req.namespace, template)
    pending = [] if req.dry_run else [t for t in mp.templates if not state.templates.cached(t)]
    if pending:
        # One create per template however many reviews need it; none runs on a review worker.
        return _Pending(req, mp, [state.templates.submit(t) for t in pending]), "pending"
    return _answer_mutate(state, req, mp, None)


async def _templates_ready(state: ServiceState, pending: _Pending, arrived: float) -> TemplateEnsureError | None:
    """None once every template exists as ours; else why not (the API's answer, or no answer
    within what is left of the review's time limit: the create goes on for later pods)."""
    left = state.review_deadline_s - (time.monotonic() - arrived)
    waiting = [asyncio.wrap_future(f) for f in pending.futures]
    done, _ = await asyncio.wait(waiting, timeout=max(left, 0.001))
    for future in waiting:
        if future not in done:
            return TemplateEnsureError("API unreachable or too slow: no answer within the review's time limit "
                                       f"({state.review_deadline_s:g} s)")
        if future.result() is not None:
            return future.result()
    return None


def _answer_mutate(state: ServiceState, req: admission.Request, mp: Decision,
                   failure: TemplateEnsureError | None) -> tuple[dict, str]:
    outcome, error = mp.outcome.metric, None
    if failure is not None:
        error, outcome = str(failure), "template_error"
        state.metrics.template_errors.inc()
        if isinstance(failure, TemplateConflict):
            outcome = "template_conflict"
            state.metrics.template_conflicts.inc()
        log.warning("template ensure failed for pod %s/%s: %s", _safe(req.namespace), _safe(req.name), failure)
    review = mutation.respond(req, mp, error)
    if not review["response"]["allowed"]:
        outcome = Outcome.DENIED.metric
    if mp.settings is not None and not req.dry_run:  # a dry run leaves no trace beyond its answer
        state.metrics.migrations.labels(outcome).inc()
        if mp.path is not None:
            state.metrics.path_choices.labels(mp.path.path, mp.path.code or "other").inc()
        # Pods that went as planned are counted, not logged one by one: in a burst the log line
        # cost as much as the review. What needs a look (legacy, denied, errors) stays at info.
        if outcome not in ROUTINE_OUTCOMES or log.isEnabledFor(logging.DEBUG):
            why = mp.path if mp.outcome is Outcome.LEGACY else None
            log.log(logging.DEBUG if outcome in ROUTINE_OUTCOMES else logging.INFO,
                    "mutate %s/%s uid=%s outcome=%s dryRun=%s%s", _safe(req.namespace),
                    _safe(req.name or "(generated)"), _safe(req.uid), outcome, req.dry_run,
                    f" why={why.code}: {why.reason}" if why is not None else "")
    return review, outcome


def _validate(state: ServiceState, req: admission.Request) -> tuple[dict, str]:
    if not validation.applies(req):
        return admission.response(req.uid, True), "skipped"
    policy = state.policy.policy
    labels = None
    if req.namespace and (policy.needs_namespace_labels or policy.rules or
                          (req.kind != "Pod" and asks_admin_access(req.obj))):
        labels = state.namespace_labels.get(req.namespace)
    settings = _settings(state, policy, req, labels)
    subject = subject_of(req.kind, req.obj, req.namespace, labels, req.raw.get("userInfo"))
    if req.kind == "Pod":
        outcome = evaluate_pod(req.obj, policy, subject, state.index(), state.claims, state.namespace_claims())
    else:
        outcome = evaluate_claim(req.obj, policy, settings, state.index(), subject, state.namespace_claims(),
                                 state.claims)
        if outcome.incomplete:
            state.metrics.internal_errors.labels("validate", "deadline" if outcome.error is None
                                                 else "internal_error").inc()
            log.warning("validate %s %s/%s uid=%s not finished: %s", req.kind, _safe(req.namespace), _safe(req.name),
                        _safe(req.uid), outcome.incomplete, exc_info=outcome.error)
    if not state.readiness()[1]["inventory"]:
        # A verdict against a stale or unsynced inventory is advice, never a denial.
        outcome.advisory()
        outcome.findings.insert(0, Finding(
            "warning", "device inventory is not synced; this verdict may be stale and is not enforced"))
    review = validation.respond(req, outcome, settings)
    result = "denied" if not review["response"]["allowed"] else ("violation" if outcome.violations else "allowed")
    if not req.dry_run:  # a dry run leaves no trace beyond its answer
        state.metrics.validations.labels(metrics_kind(req.kind), result, settings.mode).inc()
        for finding in outcome.findings:
            if finding.severity == "violation":
                state.metrics.violations.labels(_safe(req.namespace)[:63], finding.rule or "upstream",
                                                _strongest(finding.actions)).inc()
        if outcome.violations:
            # Which object and what happened at info; the findings quote selectors: debug only.
            log.info("validate %s %s/%s uid=%s mode=%s result=%s violations=%d", req.kind, _safe(req.namespace),
                     _safe(req.name), _safe(req.uid), settings.mode, result, len(outcome.violations))
            log.debug("validate uid=%s findings: %s", _safe(req.uid), "; ".join(outcome.violations)[:500])
    return review, result


def _strongest(actions: tuple) -> str:
    return next((a for a in ("Deny", "Warn", "Audit") if a in actions), "Audit")


async def _background(state: ServiceState) -> None:
    while True:
        await asyncio.sleep(state.reload_interval_s)
        try:
            state.tick()
        except Exception:  # keep reloading even if one round fails
            log.exception("background check failed")
