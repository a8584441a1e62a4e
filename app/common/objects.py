"""The typed view of a Kubernetes object where it enters our code: kind, name, namespace, labels,
annotations and the controller that owns it, read once and never re-derived inline. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .vocabulary import controller_ref, meta


@dataclass(frozen=True)
class ObjectView:
    kind: str = ""
    api_version: str = ""
    name: str = ""  # "" where it has none yet (generateName)
    namespace: str = ""  # "" for cluster-scoped objects and pods not yet given one
    generate_name: str = ""
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)  # a copy: changing it changes nothing read
    annotations: dict[str, str] = field(default_factory=dict)
    owner: Mapping | None = None  # the ownerReference marked controller
    owners: tuple = ()  # every ownerReference that is a mapping
    deleting: bool = False  # deletionTimestamp set

    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def shown(self) -> str:
        """The name as messages print it: the name, else its generateName prefix, else '?'."""
        return self.name or self.generate_name or "?"

    def owned_by(self, kind: str, name: str) -> bool:
        return any(r.get("kind") == kind and r.get("name") == name for r in self.owners)


def view_of(obj: object) -> ObjectView:
    """The view of `obj` as read; fields of the wrong type read as absent (validation names them
    where an object is admitted, not here)."""
    found = meta(obj)
    raw = obj if isinstance(obj, dict) else {}
    refs = found.get("ownerReferences")
    return ObjectView(
        kind=_text(raw.get("kind")), api_version=_text(raw.get("apiVersion")), name=_text(found.get("name")),
        namespace=_text(found.get("namespace")), generate_name=_text(found.get("generateName")),
        uid=_text(found.get("uid")), resource_version=_text(found.get("resourceVersion")),
        labels=_mapping(found.get("labels")), annotations=_mapping(found.get("annotations")),
        owner=controller_ref(obj),
        owners=tuple(r for r in refs if isinstance(r, dict)) if isinstance(refs, list) else (),
        deleting=bool(found.get("deletionTimestamp")))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: object) -> dict[str, str]:
    return dict(value) if isinstance(value, dict) else {}


def submap(obj: Mapping, key: str) -> dict:
    """obj[key] when it is a map, else an empty one: a field read without trusting its shape."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}
