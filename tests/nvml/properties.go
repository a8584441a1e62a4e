package main

/*
#cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"
#include "handles.h"
*/
import "C"

import (
	"encoding/hex"
	"strconv"
	"strings"
	"unsafe"
)

// Brand and architecture names as the description writes them (pynvml's constants' names).
var brands = map[string]C.nvmlBrandType_t{
	"Nvidia": C.NVML_BRAND_NVIDIA, "Tesla": C.NVML_BRAND_TESLA, "Quadro": C.NVML_BRAND_QUADRO,
	"Geforce": C.NVML_BRAND_GEFORCE, "Titan": C.NVML_BRAND_TITAN, "NvidiaRtx": C.NVML_BRAND_NVIDIA_RTX,
	"QuadroRtx": C.NVML_BRAND_QUADRO_RTX,
}

var architectures = map[string]C.nvmlDeviceArchitecture_t{
	"Kepler": C.NVML_DEVICE_ARCH_KEPLER, "Maxwell": C.NVML_DEVICE_ARCH_MAXWELL, "Pascal": C.NVML_DEVICE_ARCH_PASCAL,
	"Volta": C.NVML_DEVICE_ARCH_VOLTA, "Turing": C.NVML_DEVICE_ARCH_TURING, "Ampere": C.NVML_DEVICE_ARCH_AMPERE,
	"Ada Lovelace": C.NVML_DEVICE_ARCH_ADA, "Hopper": C.NVML_DEVICE_ARCH_HOPPER,
	"Blackwell": C.NVML_DEVICE_ARCH_BLACKWELL,
}

var addressingModes = map[string]C.uint{"None": C.NVML_DEVICE_ADDRESSING_MODE_NONE,
	"HMM": C.NVML_DEVICE_ADDRESSING_MODE_HMM, "ATS": C.NVML_DEVICE_ADDRESSING_MODE_ATS}

func setText(to []C.char, value string) {
	for i := range to {
		to[i] = 0
	}
	for i := 0; i < len(value) && i < len(to)-1; i++ {
		to[i] = C.char(value[i])
	}
}

// pciInfo: NVML's form of a bus id: the domain 8 digits in busId, 4 in busIdLegacy, upper case.
func pciInfo(busID string, pci *C.nvmlPciInfo_t) C.nvmlReturn_t {
	domain, rest, ok := strings.Cut(strings.ToUpper(busID), ":")
	parts := strings.Split(rest, ":")
	if !ok || len(parts) != 2 {
		return C.NVML_ERROR_UNKNOWN
	}
	d, _ := strconv.ParseUint(domain, 16, 32)
	bus, _ := strconv.ParseUint(parts[0], 16, 32)
	dev, _ := strconv.ParseUint(strings.Split(parts[1], ".")[0], 16, 32)
	pci.domain, pci.bus, pci.device = C.uint(d), C.uint(bus), C.uint(dev)
	pci.pciDeviceId, pci.pciSubSystemId = 0x233010DE, 0x16C110DE
	setText(pci.busId[:], strings.Repeat("0", 8-len(domain))+domain+":"+rest)
	setText(pci.busIdLegacy[:], domain[len(domain)-4:]+":"+rest)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetPciInfo_v3
func nvmlDeviceGetPciInfo_v3(h C.nvmlDevice_t, pci *C.nvmlPciInfo_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetPciInfo_v3", h)
	if g == nil {
		return code
	}
	return pciInfo(g.PciBusID, pci)
}

//export nvmlDeviceGetBrand
func nvmlDeviceGetBrand(h C.nvmlDevice_t, brand *C.nvmlBrandType_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetBrand", h)
	if g == nil {
		return code
	}
	found, ok := brands[g.Brand]
	if !ok && g.Brand == "" {
		found, ok = C.NVML_BRAND_NVIDIA, true
	}
	if !ok {
		found = C.NVML_BRAND_UNKNOWN
	}
	*brand = found
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetArchitecture
func nvmlDeviceGetArchitecture(h C.nvmlDevice_t, arch *C.nvmlDeviceArchitecture_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetArchitecture", h)
	if g == nil {
		return code
	}
	found, ok := architectures[g.Architecture]
	if !ok {
		found = C.NVML_DEVICE_ARCH_UNKNOWN
	}
	*arch = found
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetCudaComputeCapability
func nvmlDeviceGetCudaComputeCapability(h C.nvmlDevice_t, major, minor *C.int) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetCudaComputeCapability")
	if n == nil {
		return code
	}
	g, code := device(n, h)
	if g == nil {
		if m, parent, ok := migOf(n, h); ok == C.NVML_SUCCESS && m != nil {
			g = &n.GPUs[parent] // a MIG device has its parent's
		} else {
			return code
		}
	}
	a, b, _ := strings.Cut(g.ComputeCapability, ".")
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return C.NVML_ERROR_UNKNOWN
	}
	*major, *minor = C.int(x), C.int(y)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetNumaNodeId
func nvmlDeviceGetNumaNodeId(h C.nvmlDevice_t, numa *C.uint) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetNumaNodeId", h)
	if g == nil {
		return code
	}
	if g.NumaNode == nil {
		return C.NVML_ERROR_NOT_SUPPORTED
	}
	*numa = C.uint(*g.NumaNode)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetAddressingMode
func nvmlDeviceGetAddressingMode(h C.nvmlDevice_t, mode *C.nvmlDeviceAddressingMode_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetAddressingMode", h)
	if g == nil {
		return code
	}
	found, ok := addressingModes[g.AddressingMode]
	if !ok {
		return C.NVML_ERROR_NOT_SUPPORTED // the platform has none (the description names none)
	}
	mode.value = found
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetGpuFabricInfo
func nvmlDeviceGetGpuFabricInfo(h C.nvmlDevice_t, info *C.nvmlGpuFabricInfo_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetGpuFabricInfo", h)
	if g == nil {
		return code
	}
	cluster, clique, ok := strings.Cut(g.FabricClique, ".")
	raw, err := hex.DecodeString(strings.ReplaceAll(cluster, "-", ""))
	id, errID := strconv.ParseUint(clique, 10, 32)
	if !ok || err != nil || errID != nil || len(raw) != C.NVML_GPU_FABRIC_UUID_LEN {
		return C.NVML_ERROR_NOT_SUPPORTED // not on an NVLink fabric
	}
	uuid := (*[C.NVML_GPU_FABRIC_UUID_LEN]C.uchar)(unsafe.Pointer(&info.clusterUuid[0]))
	for i, b := range raw {
		uuid[i] = C.uchar(b)
	}
	info.status, info.cliqueId, info.state = C.NVML_SUCCESS, C.uint(id), C.NVML_GPU_FABRIC_STATE_COMPLETED
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetNvLinkState
func nvmlDeviceGetNvLinkState(h C.nvmlDevice_t, link C.uint, active *C.nvmlEnableState_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetNvLinkState", h)
	if g == nil {
		return code
	}
	switch {
	case len(g.NvlinkPeers) == 0:
		return C.NVML_ERROR_NOT_SUPPORTED
	case link >= C.NVML_NVLINK_MAX_LINKS:
		return C.NVML_ERROR_INVALID_ARGUMENT
	case int(link) < len(g.NvlinkPeers):
		*active = C.NVML_FEATURE_ENABLED
	default:
		*active = C.NVML_FEATURE_DISABLED
	}
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetNvLinkRemotePciInfo_v2
func nvmlDeviceGetNvLinkRemotePciInfo_v2(h C.nvmlDevice_t, link C.uint, pci *C.nvmlPciInfo_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetNvLinkRemotePciInfo_v2", h)
	if g == nil {
		return code
	}
	if int(link) >= len(g.NvlinkPeers) {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	return pciInfo(g.NvlinkPeers[link], pci)
}

// nvmlDeviceGetTopologyCommonAncestor: how two GPUs connect over PCIe, from the description:
// one PCIe root (a host bridge), one NUMA node, or across the system.
//
//export nvmlDeviceGetTopologyCommonAncestor
func nvmlDeviceGetTopologyCommonAncestor(a, b C.nvmlDevice_t, level *C.nvmlGpuTopologyLevel_t) C.nvmlReturn_t {
	n, first, code := enterGPU("nvmlDeviceGetTopologyCommonAncestor", a)
	if first == nil {
		return code
	}
	second, code := device(n, b)
	if second == nil {
		return code
	}
	switch {
	case first == second:
		*level = C.NVML_TOPOLOGY_INTERNAL
	case first.PcieRoot != "" && first.PcieRoot == second.PcieRoot:
		*level = C.NVML_TOPOLOGY_HOSTBRIDGE
	case first.NumaNode != nil && second.NumaNode != nil && *first.NumaNode == *second.NumaNode:
		*level = C.NVML_TOPOLOGY_NODE
	default:
		*level = C.NVML_TOPOLOGY_SYSTEM
	}
	return C.NVML_SUCCESS
}
