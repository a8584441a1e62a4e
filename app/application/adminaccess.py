"""Who can use DRA's admin access: namespaces carrying upstream's label (anyone who may label a
namespace may set it, kubernetes#141293) and the claims and templates that ask for it, as `audit`
reports them on every run. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from app.common import view_of, vocabulary

from .validate import asks_admin_access


@dataclass(frozen=True)
class AdminAccess:
    namespaces: tuple[str, ...]  # labelled resource.kubernetes.io/admin-access=true
    requests: tuple[str, ...]  # Kind namespace/name of claims and templates asking adminAccess
    named: frozenset  # namespaces some rule's adminAccessNamespaces names

    def lines(self) -> list[str]:
        out = [f"admin access: namespace {n} is labelled {vocabulary.ADMIN_ACCESS_LABEL}=true: whoever may label "
               "it may give its claims every device's admin access"
               + ("" if n in self.named else " (no rule's adminAccessNamespaces names it)")
               for n in self.namespaces]
        out += [f"admin access: {r} asks for it" for r in self.requests]
        return out

    def as_json(self) -> dict:
        return {"labelledNamespaces": list(self.namespaces), "requests": list(self.requests),
                "namedByPolicy": sorted(self.named)}


def admin_access(namespaces: dict[str, dict], objects: list[dict], policy) -> AdminAccess:
    labelled = tuple(sorted(n for n, labels in (namespaces or {}).items()
                            if (labels or {}).get(vocabulary.ADMIN_ACCESS_LABEL) == "true"))
    asking = tuple(sorted(f"{v.kind} {v.namespace or 'default'}/{v.name}" for obj in objects
                          if (v := view_of(obj)).kind in ("ResourceClaim", "ResourceClaimTemplate")
                          and asks_admin_access(obj)))
    named = frozenset(n for r in policy.rules for n in (r.adminAccessNamespaces or ()))
    return AdminAccess(labelled, asking, named)
