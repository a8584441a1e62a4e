"""The Kubernetes words every layer reads: an object's metadata, a pod's controller, the labels
and annotations dra-bridge writes, NVIDIA's driver name, the DRA API's limits. One definition
each."""

from __future__ import annotations

NVIDIA_DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver, and the domain its attribute names carry
# The DeviceClasses NVIDIA's driver creates (the GPU class shares the driver's name).
NVIDIA_GPU_CLASS, NVIDIA_MIG_CLASS = NVIDIA_DRIVER, "mig.nvidia.com"
SHADOW_OF = "dra-bridge.io/shadow-of"  # on our reporter's shadow slices: the driver they stand in for
# Where Kueue's manifests and Helm chart keep its Configuration, and its manager Deployment.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
KUEUE_DEPLOYMENT = "kueue-controller-manager"

# What dra-bridge writes: who manages an object, what a rewrite did, a node's move record.
OURS = "dra-bridge"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = {MANAGED_BY_LABEL: OURS}
OUR_DOMAIN = "dra-bridge.io"  # our reporter's attributes and capacities, our labels and annotations
MIGRATION_ANNOTATION = f"{OUR_DOMAIN}/migration"
POLICY_RULE_ANNOTATION = f"{OUR_DOMAIN}/rule"  # on the ValidatingAdmissionPolicies `policy compile` writes
OPT_IN_LABEL = f"{OUR_DOMAIN}/migrate=enabled"  # serve --template-namespace-label, the manifests, the chart
EVENT_COMPONENT = f"{OUR_DOMAIN}/webhook"  # reportingComponent of our Events
ROLLOUT_WAVE = f"{OUR_DOMAIN}/rollout-wave"  # node annotations: the wave a node moved in, its step, what it was
ROLLOUT_STEP = f"{OUR_DOMAIN}/rollout-step"
ROLLOUT_BEFORE = f"{OUR_DOMAIN}/rollout-before"
# Steps of an undo before its node is off DRA (rollout.record.Step): no new claim goes there.
ROLLOUT_LEAVING_STEPS = frozenset({"undoing", "undo-evicted", "undo-restored"})
NUMA_ATTRIBUTE = f"{OUR_DOMAIN}/numaNode"  # our reporter's; NVIDIA's driver publishes no NUMA node
SHARE_CORES = f"{OUR_DOMAIN}/cores"  # capacity: percent of a GPU's compute, on shareable GPUs

# What others write that we read: the switches of the GPU Operator's device plugin and NVIDIA's
# kubelet plugin, upstream's DRA keys, Kueue's queue label, the cordon taint.
DEVICE_PLUGIN_SWITCH = "nvidia.com/gpu.deploy.device-plugin"
DRA_PLUGIN_SWITCH = "nvidia.com/dra-kubelet-plugin"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"  # on claims stamped from templates
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"  # KEP-5004's claim of a pod
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

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
