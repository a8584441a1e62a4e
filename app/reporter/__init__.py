"""The node reporter: GPU facts from NVML or a fake description (`gpuinfo`, `backends`), rendered
as ResourceSlices in NVIDIA's DRA schema (`render`, pure), published for this node (`publish`, `daemon`)."""

from . import render
from .backends import EXIT_NO_DRIVER, EXIT_NO_GPUS, EXIT_NO_LIBRARY, EXIT_NVML_CALL, Backend, BackendError, open_backend
from .daemon import SHADOW_DRIVER, driver_for_mode, render_style, run_loop
from .gpuinfo import Gpu, MigDevice, NodeGpus, node_from_description
from .publish import PublishError, PublishResult, SlicePublisher

__all__ = ["EXIT_NO_DRIVER", "EXIT_NO_GPUS", "EXIT_NO_LIBRARY", "EXIT_NVML_CALL", "SHADOW_DRIVER", "Backend", "BackendError", "Gpu",
           "MigDevice", "NodeGpus", "PublishError", "PublishResult", "SlicePublisher", "driver_for_mode", "render_style",
           "node_from_description", "open_backend", "render", "run_loop"]
