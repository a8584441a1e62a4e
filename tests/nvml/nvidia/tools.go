//go:build tools

// NVIDIA's device plugin and GPU feature discovery at the release the GPU Operator ships,
// built from the module proxy for the tests (tests/nvml/nvidia.py).
package main

import (
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery"
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
)
