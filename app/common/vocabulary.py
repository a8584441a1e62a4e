"""The Kubernetes words every layer reads: an object's metadata, a pod's controller, the labels
and annotations dra-bridge writes, NVIDIA's driver name. One definition each."""

from __future__ import annotations

NVIDIA_DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver, and the domain its attribute names carry
SHADOW_OF = "dra-bridge.io/shadow-of"  # on our reporter's shadow slices: the driver they stand in for


def meta(obj: object) -> dict:
    """An object's metadata, {} where it has none (or none that is a mapping)."""
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def controller_ref(obj: object) -> dict | None:
    """The ownerReference marked controller (what recreates the object), if any."""
    refs = meta(obj).get("ownerReferences")
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None) \
        if isinstance(refs, list) else None
