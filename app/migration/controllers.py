"""Controllers that read a workload's GPU count from its pod template's limits. Pure.

`plan` rewrites stored objects; a controller that reads the GPU limits of the object would see
none after the rewrite. Either the count is made explicit (KubeRay's rayStartParams.num-gpus)
or the object is left as it is and its pods are migrated at admission, after the controller has
read the count (Kueue's quota, Kubeflow's per-node process count).
"""

from __future__ import annotations

import re

from app.common import submap
from app.common import view_of

from .quota import KUEUE_QUEUE as KUEUE_LABEL

RAY_KINDS = {"RayCluster", "RayJob", "RayService"}
TRAINER_KINDS = {"TrainingRuntime", "ClusterTrainingRuntime", "TrainJob"}
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def left_to_admission(obj: dict) -> str | None:
    """Why `plan` must leave this object's pod templates as they are; None when it may rewrite."""
    labels = view_of(obj).labels
    if KUEUE_LABEL in labels:
        return (f"Kueue ({KUEUE_LABEL}={labels[KUEUE_LABEL]}) charges the pod template's GPU requests to its "
                "ClusterQueue: rewriting the stored object would take them out of quota; its pods are migrated "
                "at admission, after Kueue admitted the workload")
    api, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    if kind in TRAINER_KINDS and api.startswith("trainer.kubeflow.org/"):
        return ("Kubeflow Trainer derives numProcPerNode (auto) from the trainer's GPU limits: rewriting the "
                "stored object would start one process per node; its pods are migrated at admission")
    if kind == "PyTorchJob" and _nproc_auto(obj):
        return ("the Training Operator derives nprocPerNode (auto) from the GPU limits: its pods are migrated "
                "at admission")
    return None


def _nproc_auto(obj: dict) -> bool:
    spec = submap(obj, "spec")
    elastic = submap(spec, "elasticPolicy")
    value = spec.get("nprocPerNode", elastic.get("nProcPerNode", "auto"))
    return str(value) == "auto"


def ray_gpu_count(holder: dict) -> str | None:
    """What KubeRay would pass as --num-gpus for this group: a non-zero limit ending in 'gpu' on
    the Ray container (the first)."""
    containers = (holder.get("spec") or {}).get("containers") or []
    if not containers or not isinstance(containers[0], dict):
        return None
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    for key, value in limits.items() if isinstance(limits, dict) else ():
        if str(key).endswith("gpu") and str(value) not in ("0", ""):
            return str(value)
    return None


def ray_group(obj: dict, template_path: str) -> dict | None:
    """The head or worker group holding the template at `template_path` (its rayStartParams
    live beside it), in a RayCluster, RayJob or RayService."""
    if str(obj.get("kind", "")) not in RAY_KINDS or not template_path.endswith(".template"):
        return None
    node = obj
    for name, index in _STEP.findall(template_path[: -len(".template")]):
        try:
            node = node[int(index)] if index else node[name]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return node if isinstance(node, dict) else None


def keep_ray_gpu_count(obj: dict, template_path: str, original_holder: dict) -> str | None:
    """Set rayStartParams.num-gpus from the limits the rewrite removes; the note, or None."""
    count = ray_gpu_count(original_holder)
    group = ray_group(obj, template_path)
    if count is None or group is None:
        return None
    params = group.setdefault("rayStartParams", {})
    if not isinstance(params, dict) or "num-gpus" in params:
        return None
    params["num-gpus"] = count
    return (f"set rayStartParams.num-gpus={count}: KubeRay read the GPU count from the limits the rewrite "
            "removed")
