"""admission.k8s.io/v1 wire types: parse a review, build a response. Pure."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import orjson

from app.common import InputError

API_VERSION = "admission.k8s.io/v1"
MAX_WARNING_LENGTH = 256  # the API server truncates longer warnings anyway
MAX_WARNINGS = 16


@dataclass(frozen=True)
class Request:
    uid: str
    kind: str
    operation: str
    namespace: str
    name: str
    obj: dict | None
    old: dict | None
    dry_run: bool
    raw: dict


def parse_review(body: bytes) -> Request:
    """Decode an AdmissionReview; InputError names the offending field (answered with 400)."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InputError("", f"body is not valid JSON: {exc}") from exc
    if not isinstance(review, dict):
        raise InputError("", "body must be a JSON object (an AdmissionReview)")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != "AdmissionReview":
        raise InputError("kind", f"expected AdmissionReview, got {_short(kind)}")
    if api_version != API_VERSION:
        raise InputError("apiVersion", f"unsupported apiVersion {_short(api_version)}; "
                                       f"configure admissionReviewVersions: [v1]")
    req = review.get("request")
    if not isinstance(req, dict):
        raise InputError("request", "missing or not an object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise InputError("request.uid", "missing or not a string")
    kind_obj = req.get("kind")
    if not isinstance(kind_obj, dict) or not isinstance(kind_obj.get("kind"), str):
        raise InputError("request.kind", "missing or not a GroupVersionKind object")
    operation = req.get("operation")
    if not isinstance(operation, str):
        raise InputError("request.operation", "missing or not a string")
    obj, old = req.get("object"), req.get("oldObject")
    for field, value in (("request.object", obj), ("request.oldObject", old)):
        if value is not None and not isinstance(value, dict):
            raise InputError(field, "must be an object or null")
        if value is not None and "metadata" in value and not isinstance(value["metadata"], dict):
            raise InputError(f"{field}.metadata", "must be an object")
    dry_run = req.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise InputError("request.dryRun", "must be a boolean")
    meta = (obj or {}).get("metadata") or {}
    namespace = req.get("namespace") or meta.get("namespace") or ""
    name = req.get("name") or meta.get("name") or ""
    for field, value in (("request.namespace", namespace), ("request.name", name)):
        if not isinstance(value, str):
            raise InputError(field, "must be a string")
    _bounded_depth(review)
    return Request(uid, kind_obj["kind"], operation, namespace, name, obj, old, dry_run, req)


MAX_DEPTH = 254  # far beyond any Kubernetes object; deeper input only exhausts recursion later


def _bounded_depth(review: dict) -> None:
    try:
        orjson.dumps(review)  # C: refuses nesting past 254 levels, at a fraction of a millisecond
    except TypeError as exc:
        if "Recursion" in str(exc):
            raise InputError("request", f"nested more than {MAX_DEPTH} levels deep") from exc
        raise InputError("request", f"cannot be re-encoded: {exc}") from exc


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def clip_warnings(warnings: list[str]) -> list[str]:
    out = []
    for text in warnings[:MAX_WARNINGS]:
        text = "dra-bridge: " + text
        out.append(text if len(text) <= MAX_WARNING_LENGTH else text[: MAX_WARNING_LENGTH - 3] + "...")
    return out


def response(uid: str, allowed: bool, *, patch: bytes | None = None, warnings: list[str] | None = None,
             message: str | None = None, code: int | None = None,
             audit: dict[str, str] | None = None) -> dict:
    resp: dict = {"uid": uid, "allowed": allowed}
    if patch is not None:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(patch).decode()
    if warnings:
        resp["warnings"] = clip_warnings(warnings)
    if message is not None or code is not None:
        resp["status"] = {"message": message or "", "code": code or (200 if allowed else 403)}
        if not allowed:
            resp["status"]["reason"] = "Forbidden"
    if audit:
        resp["auditAnnotations"] = audit
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": resp}


def answer(uid: str, found) -> dict:
    """The AdmissionReview of an application.Answer."""
    return response(uid, found.allowed, patch=found.patch, warnings=found.warnings, message=found.message,
                    code=found.code, audit=found.audit)
