"""The realistic test inventory: NVIDIA nodes rendered by our reporter plus example-driver slices.

- gpu-h100-0: 8x H100 SXM (app/data/fake/h100x8.yaml)
- gpu-a100-0: 8x A100 80GB, MIG on GPUs 0-1 (app/data/fake/a100-mig.yaml)
- gpu-l4-0: 4x L4 (app/data/fake/l4x4.yaml)
- gpu-a100-40-0: 8x A100 40GB, MIG 1g.5gb/2g.10gb/3g.20gb (tests/data/a100-40gb-mig.yaml)
- dra-example-driver-cluster-worker: 8 gpu.example.com devices in the dra-example-driver schema
  (tests/data/example-driver-slices.yaml)
DeviceClasses: gpu.nvidia.com, mig.nvidia.com (NVIDIA's), gpu.example.com (the example driver's).
"""

import yaml

from app import dra
from app.cli import load_inventory
from app.dra import Inventory
from app.reporter import node_from_description, render
from tests.conftest import ROOT

EXAMPLE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                 "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}


def build_inventory() -> Inventory:
    inv = load_inventory(None)
    desc = node_from_description(yaml.safe_load((ROOT / "tests" / "data" / "a100-40gb-mig.yaml").read_text()), "a100-40")
    inv.slices.extend(render.slices(desc, "gpu-a100-40-0", "gpu.nvidia.com", 1))
    inv.slices.extend(load_inventory(str(ROOT / "tests" / "data" / "example-driver-slices.yaml")).slices)
    inv.classes["gpu.example.com"] = EXAMPLE_CLASS
    return inv


def build_index(allocated=None):
    return dra.build_index(build_inventory(), allocated)
