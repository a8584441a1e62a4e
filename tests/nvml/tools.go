//go:build tools

// The NVML header this library is compiled against comes from NVIDIA's go-nvml module: the
// import pins its version here without linking any of it.
package main

import _ "github.com/NVIDIA/go-nvml/pkg/nvml"
