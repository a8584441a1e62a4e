"""/validate on the wire: which reviews it judges, and the AdmissionReview answer of a judgment
(application.validate)."""

from __future__ import annotations

from app import dra
from app.application import Judgment, validate_answer
from app.policy import Effective

from . import admission


def applies(req: admission.Request) -> bool:
    if req.kind in dra.CLAIM_KINDS:
        return req.operation in ("CREATE", "UPDATE") and req.obj is not None
    return req.kind == "Pod" and req.operation == "CREATE" and req.obj is not None


def respond(req: admission.Request, outcome: Judgment, settings: Effective) -> dict:
    return admission.answer(req.uid, validate_answer(req.kind, req.namespace, req.name, outcome, settings))
