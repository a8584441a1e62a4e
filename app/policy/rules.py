"""Admin rules: what a policy's `rules` entries say (limits, allowed classes and devices, required
selectors, CEL validations), whom each applies to and with which actions. Schema, with every
expression compiled at load (app.cel); the verdicts are application.engine's."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app import cel
from app.common import InputError

Kind = Literal["Pod", "ResourceClaim", "ResourceClaimTemplate"]
Action = Literal["Deny", "Warn", "Audit"]  # ValidatingAdmissionPolicyBinding's validationActions
MODE_ACTIONS: dict[str, list[Action]] = {"enforce": ["Deny"], "warn": ["Warn"], "audit": ["Audit"]}
_RULE_NAME = re.compile(r"[a-z0-9]([-.a-z0-9]{0,61}[a-z0-9])?")
# What a validation's CEL may read (each dyn): the request judged, the object, its namespace, and
# the devices the request could be given.
REQUEST_VARIABLES = frozenset({"request", "object", "namespace", "devices"})


def _compile_error(expression: str, devices: bool, result: str = "bool") -> str | None:
    """Why an expression does not compile or type-check (devices: a device selector, else a
    validation giving `result`): a policy with a bad expression never loads."""
    try:
        if devices:
            cel.compile_selector(expression)
        else:
            cel.compile_program(expression, REQUEST_VARIABLES, result)
    except cel.CelError as exc:
        return str(exc)
    return None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A term of kubectl's selector syntax; terms are split on commas outside parentheses.
_SELECTOR_TERMS = re.compile(r"(?:[^,(]|\([^)]*\))+")
_SELECTOR_TERM = re.compile(r"(!?)([\w./-]+)\s*(?:(!=|==|=)\s*([\w.-]*)|\s+(in|notin)\s*\(([^)]*)\))?")


class LabelSelectorRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []

    @model_validator(mode="after")
    def _values(self) -> "LabelSelectorRequirement":
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(_Strict):
    matchLabels: dict[str, str] = {}
    matchExpressions: list[LabelSelectorRequirement] = []

    @classmethod
    def parse(cls, text: str | None, field: str = "selector") -> "LabelSelector":
        """kubectl's -l syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`,
        comma-separated; InputError naming `field` for anything else."""
        labels: dict[str, str] = {}
        expressions: list[LabelSelectorRequirement] = []
        for term in (t.strip() for t in _SELECTOR_TERMS.findall(text or "")):
            if not term:
                continue
            found = _SELECTOR_TERM.fullmatch(term)
            if not found:
                raise InputError(field, f"not a label selector term: {term!r}")
            negated, key, op, value, set_op, values = found.groups()
            if set_op:
                listed = [v.strip() for v in values.split(",") if v.strip()]
                expressions.append(LabelSelectorRequirement(key=key, operator="In" if set_op == "in" else "NotIn",
                                                            values=listed))
            elif op in ("=", "=="):
                labels[key] = value
            elif op == "!=":  # as kubectl: absent, or another value
                expressions.append(LabelSelectorRequirement(key=key, operator="NotIn", values=[value]))
            else:
                expressions.append(LabelSelectorRequirement(key=key, operator="DoesNotExist" if negated else "Exists"))
        return cls(matchLabels=labels, matchExpressions=expressions)

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.matchLabels.items()):
            return False
        for req in self.matchExpressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


class Scope(_Strict):
    """Which objects: every field set must hold (an empty scope is everything)."""

    namespaces: list[str] = []
    namespaceSelector: Optional[LabelSelector] = None
    objectSelector: Optional[LabelSelector] = None  # the pod's, claim's or template's labels
    kinds: list[Kind] = []


class Exclusion(Scope):
    """Who or what is exempt: any one field that holds exempts the request."""

    users: list[str] = []
    groups: list[str] = []
    serviceAccounts: list[str] = []  # namespace/name

    @field_validator("serviceAccounts")
    @classmethod
    def _account(cls, values: list[str]) -> list[str]:
        for value in values:
            namespace, sep, name = value.partition("/")
            if not sep or not namespace or not name or "/" in name:
                raise ValueError(f"{value!r}: expected namespace/name")
        return values


class CelValidation(_Strict):
    """A VAP-style check over one device request: `expression` must be true. Variables:
    request (name, deviceClassName, allocationMode, count, devices, adminAccess, selectors,
    claim), object (the whole pod, claim or template), namespace (its name) and devices (the
    candidate devices, each as a selector's `device`)."""

    expression: str
    message: Optional[str] = None
    messageExpression: Optional[str] = None  # CEL giving the message (a string)


class Rule(_Strict):
    name: str
    description: Optional[str] = None
    # None: the mode of the namespace judged (defaults.mode, or its namespaces entry's): warn warns
    validationActions: Optional[list[Action]] = None
    match: Scope = Scope()
    exclude: Optional[Exclusion] = None
    message: Optional[str] = None  # said instead of the generated reason (which is kept after it)
    # What the rule checks; a request is judged by the devices it would take: its count, or for
    # allocationMode All the devices the inventory has that it matches.
    maxDevicesPerRequest: Optional[int] = Field(default=None, ge=1)
    maxDevicesPerClaim: Optional[int] = Field(default=None, ge=1)
    maxDevicesPerPod: Optional[int] = Field(default=None, ge=1)  # every claim of the pod, legacy asks included
    # The namespace's ResourceClaims now (allocated: what they hold; pending: what they ask) and
    # this object's: a guardrail; ResourceQuota is the atomic cap (concurrent creates pass together).
    maxDevicesPerNamespace: Optional[int] = Field(default=None, ge=1)
    allowedDeviceClasses: Optional[list[str]] = None
    allowAdminAccess: Optional[bool] = None  # False: adminAccess requests violate
    # adminAccess only in these namespaces, named here by the admin: upstream's namespace label
    # (resource.kubernetes.io/admin-access) can be set by whoever may label the namespace.
    adminAccessNamespaces: Optional[list[str]] = None
    forbidLegacy: Optional[bool] = None  # True: pods asking for legacy GPU resources violate
    requireSelectors: list[str] = []  # qualified attribute/capacity names every request must select on
    allowedDevices: Optional[str] = None  # device CEL: every device a request can take must pass it
    validations: list[CelValidation] = []

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _RULE_NAME.fullmatch(value):
            raise ValueError("must be lowercase alphanumerics, '-' or '.', at most 63 characters")
        return value

    @field_validator("requireSelectors")
    @classmethod
    def _qualified(cls, values: list[str]) -> list[str]:
        for value in values:
            domain, sep, name = value.rpartition("/")
            if not sep or not domain or not name:
                raise ValueError(f"{value!r}: expected a qualified name, domain/name (gpu.nvidia.com/productName)")
        return values

    @field_validator("validationActions")
    @classmethod
    def _actions(cls, values: list[Action] | None) -> list[Action] | None:
        if values is None:
            return values
        if not values:
            raise ValueError("at least one of Deny, Warn, Audit")
        if len(set(values)) != len(values):
            raise ValueError("each action at most once")
        if "Deny" in values and "Warn" in values:
            raise ValueError("Deny and Warn together are not allowed (as in ValidatingAdmissionPolicyBinding)")
        return values

    @model_validator(mode="after")
    def _expressions(self) -> "Rule":
        found = [("allowedDevices", self.allowedDevices, True, "bool")] if self.allowedDevices else []
        for i, check in enumerate(self.validations):
            found.append((f"validations[{i}].expression", check.expression, False, "bool"))
            if check.messageExpression:
                found.append((f"validations[{i}].messageExpression", check.messageExpression, False, "string"))
        for where, expression, devices, result in found:
            error = _compile_error(expression, devices, result)
            if error:
                raise ValueError(f"{where}: CEL does not compile: {error}")
        return self

    @model_validator(mode="after")
    def _checks_something(self) -> "Rule":
        checks = ("maxDevicesPerRequest", "maxDevicesPerClaim", "maxDevicesPerPod", "maxDevicesPerNamespace",
                  "allowedDeviceClasses",
                  "allowAdminAccess", "adminAccessNamespaces", "forbidLegacy", "allowedDevices")
        if not any(getattr(self, name) is not None for name in checks) and not self.requireSelectors \
                and not self.validations:
            raise ValueError(f"rule {self.name!r} checks nothing: set one of {', '.join(checks)}, "
                             "requireSelectors or validations")
        return self
