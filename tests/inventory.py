"""The realistic test inventory: NVIDIA nodes rendered by our reporter plus the example driver's real slices.

- gpu-h100-0: 8x H100 SXM (app/data/fake/h100x8.yaml)
- gpu-a100-0: 8x A100 80GB, MIG on GPUs 0-1 (app/data/fake/a100-mig.yaml)
- gpu-l4-0: 4x L4 (app/data/fake/l4x4.yaml)
- gpu-a100-40-0: 8x A100 40GB, MIG 1g.5gb/2g.10gb/3g.20gb (tests/data/a100-40gb-mig.yaml)
- dra-example-driver-cluster-worker: 8 gpu.example.com devices, the dra-example-driver README output
DeviceClasses: gpu.nvidia.com, mig.nvidia.com (NVIDIA's), gpu.example.com (the example driver's).
"""

import yaml

from app import index as index_mod
from app import render
from app.documents import read_objects
from app.gpuinfo import node_from_description
from app.inventory import Inventory, from_objects, load_example
from tests.conftest import CORPUS, ROOT

EXAMPLE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                 "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}


def build_inventory() -> Inventory:
    inv = load_example()
    desc = node_from_description(yaml.safe_load((ROOT / "tests" / "data" / "a100-40gb-mig.yaml").read_text()), "a100-40")
    inv.slices.extend(render.slices(desc, "gpu-a100-40-0", "gpu.nvidia.com", 1))
    draex = from_objects(read_objects(str(CORPUS / "slices" / "draex-readme-resourceslice-list.yaml")), "draex")
    inv.slices.extend(draex.slices)
    inv.classes["gpu.example.com"] = EXAMPLE_CLASS
    return inv


def build_index(allocated=None):
    return index_mod.build(build_inventory(), allocated)
