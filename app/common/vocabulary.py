"""The Kubernetes words every layer reads: an object's metadata, a pod's controller, the labels
and annotations dra-bridge writes, NVIDIA's driver name, the DRA API's limits. One definition
each."""

from __future__ import annotations

NVIDIA_DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver, and the domain its attribute names carry
SHADOW_OF = "dra-bridge.io/shadow-of"  # on our reporter's shadow slices: the driver they stand in for
# Where Kueue's manifests and Helm chart keep its Configuration, and its manager Deployment.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
KUEUE_DEPLOYMENT = "kueue-controller-manager"

# resource.k8s.io/v1 validation limits (k8s.io/api/resource/v1 constants)
DRA_MAX_REQUESTS = 32  # DeviceRequestsMaxSize
DRA_MAX_DEVICES_PER_CLAIM = 32  # AllocationResultsMaxSize
DRA_MAX_SELECTORS = 32  # DeviceSelectorsMaxSize
DRA_MAX_CEL_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
DRA_MAX_CEL_COST = 1_000_000  # CELSelectorExpressionMaxCost: estimated at creation, charged at run time
DRA_MAX_ATTRIBUTES_PER_DEVICE = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
DRA_MAX_ATTRIBUTE_VALUE_LENGTH = 64  # DeviceAttributeMaxValueLength
DRA_MAX_DOMAIN_LENGTH, DRA_MAX_ID_LENGTH, DRA_MAX_DRIVER_NAME_LENGTH = 63, 32, 63


def meta(obj: object) -> dict:
    """An object's metadata, {} where it has none (or none that is a mapping)."""
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def controller_ref(obj: object) -> dict | None:
    """The ownerReference marked controller (what recreates the object), if any."""
    refs = meta(obj).get("ownerReferences")
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None) \
        if isinstance(refs, list) else None
