package main

/*
#cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"
#include "handles.h"
*/
import "C"

import "unsafe"

// GPU instance ids: the MIG device's position plus one (0 is never an instance id).
func instanceID(j int) C.uint { return C.uint(j + 1) }

//export nvmlDeviceGetMigMode
func nvmlDeviceGetMigMode(h C.nvmlDevice_t, current, pending *C.uint) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetMigMode", h)
	if g == nil {
		return code
	}
	if !g.migEnabled() && len(g.MigProfiles) == 0 {
		return C.NVML_ERROR_NOT_SUPPORTED // not a MIG-capable GPU
	}
	mode := C.uint(C.NVML_DEVICE_MIG_DISABLE)
	if g.migEnabled() {
		mode = C.NVML_DEVICE_MIG_ENABLE
	}
	*current, *pending = mode, mode
	return C.NVML_SUCCESS
}

//export nvmlDeviceIsMigDeviceHandle
func nvmlDeviceIsMigDeviceHandle(h C.nvmlDevice_t, isMig *C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceIsMigDeviceHandle")
	if n == nil {
		return code
	}
	if _, _, ok := migOf(n, h); ok == C.NVML_SUCCESS {
		*isMig = 1
		return C.NVML_SUCCESS
	}
	if g, code := device(n, h); g == nil {
		return code
	}
	*isMig = 0
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetMaxMigDeviceCount
func nvmlDeviceGetMaxMigDeviceCount(h C.nvmlDevice_t, count *C.uint) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetMaxMigDeviceCount", h)
	if g == nil {
		return code
	}
	if !g.migEnabled() && len(g.MigProfiles) == 0 {
		return C.NVML_ERROR_NOT_SUPPORTED
	}
	*count = 7
	if len(g.MigDevices) > 7 {
		*count = C.uint(len(g.MigDevices))
	}
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetMigDeviceHandleByIndex
func nvmlDeviceGetMigDeviceHandleByIndex(h C.nvmlDevice_t, index C.uint, mig *C.nvmlDevice_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetMigDeviceHandleByIndex", h)
	if g == nil {
		return code
	}
	if !g.migEnabled() || int(index) >= len(g.MigDevices) || index >= C.MAX_MIGS {
		return C.NVML_ERROR_NOT_FOUND
	}
	*mig = C.mig_handle(C.uint(C.gpu_of(h)), index)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetDeviceHandleFromMigDeviceHandle
func nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig C.nvmlDevice_t, parent *C.nvmlDevice_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
	if n == nil {
		return code
	}
	_, i, code := migOf(n, mig)
	if code != C.NVML_SUCCESS {
		return code
	}
	*parent = C.gpu_handle(C.uint(i))
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetAttributes_v2
func nvmlDeviceGetAttributes_v2(h C.nvmlDevice_t, attrs *C.nvmlDeviceAttributes_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetAttributes_v2")
	if n == nil {
		return code
	}
	if m, _, ok := migOf(n, h); ok == C.NVML_SUCCESS {
		gi, ci, _, _ := slices(m.Profile)
		attrs.multiprocessorCount, attrs.sharedCopyEngineCount = C.uint(m.Multiprocessors), C.uint(m.CopyEngines)
		attrs.sharedDecoderCount, attrs.sharedEncoderCount = C.uint(m.Decoders), C.uint(m.Encoders)
		attrs.sharedJpegCount, attrs.sharedOfaCount = C.uint(m.JpegEngines), C.uint(m.OfaEngines)
		attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount = C.uint(gi), C.uint(ci)
		attrs.memorySizeMB = C.ulonglong(m.MemoryMiB)
		return C.NVML_SUCCESS
	}
	g, code := device(n, h)
	if g == nil {
		return code
	}
	*attrs = C.nvmlDeviceAttributes_t{}
	attrs.multiprocessorCount, attrs.memorySizeMB = C.uint(g.Multiprocessors), C.ulonglong(g.MemoryMiB)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetGpuInstanceId
func nvmlDeviceGetGpuInstanceId(h C.nvmlDevice_t, id *C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetGpuInstanceId")
	if n == nil {
		return code
	}
	k := int(C.mig_of(h))
	if _, _, ok := migOf(n, h); ok != C.NVML_SUCCESS {
		return C.NVML_ERROR_NOT_SUPPORTED // a whole GPU has no instance id
	}
	*id = instanceID(k % C.MAX_MIGS)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetGpuInstanceById
func nvmlDeviceGetGpuInstanceById(h C.nvmlDevice_t, id C.uint, instance *C.nvmlGpuInstance_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetGpuInstanceById", h)
	if g == nil {
		return code
	}
	for j := range g.MigDevices {
		if instanceID(j) == id && j < C.MAX_MIGS {
			*instance = C.instance_handle(C.uint(C.gpu_of(h)), C.uint(j))
			return C.NVML_SUCCESS
		}
	}
	return C.NVML_ERROR_NOT_FOUND
}

//export nvmlGpuInstanceGetInfo
func nvmlGpuInstanceGetInfo(instance C.nvmlGpuInstance_t, info *C.nvmlGpuInstanceInfo_t) C.nvmlReturn_t {
	n, code := enter("nvmlGpuInstanceGetInfo")
	if n == nil {
		return code
	}
	k := int(C.instance_of(instance))
	i, j := k/C.MAX_MIGS, k%C.MAX_MIGS
	if k < 0 || i >= len(n.GPUs) || j >= len(n.GPUs[i].MigDevices) {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	m := &n.GPUs[i].MigDevices[j]
	info.device, info.id, info.profileId = C.gpu_handle(C.uint(i)), instanceID(j), C.uint(m.giProfileID())
	info.placement.start, info.placement.size = C.uint(m.PlacementStart), C.uint(m.placementSize())
	return C.NVML_SUCCESS
}

// profile: the MIG profile with that GI profile id this GPU can create.
func profile(g *gpu, id C.uint) *migProfile {
	for k := range g.MigProfiles {
		if C.uint(g.MigProfiles[k].GIProfileID) == id {
			return &g.MigProfiles[k]
		}
	}
	return nil
}

//export nvmlDeviceGetGpuInstanceProfileInfoV
func nvmlDeviceGetGpuInstanceProfileInfoV(h C.nvmlDevice_t, id C.uint,
	info *C.nvmlGpuInstanceProfileInfo_v2_t) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetGpuInstanceProfileInfoV", h)
	if g == nil {
		return code
	}
	p := profile(g, id)
	if p == nil {
		return C.NVML_ERROR_NOT_SUPPORTED
	}
	slice, _, _, _ := slices(p.Profile)
	info.id, info.isP2pSupported, info.sliceCount = id, 0, C.uint(slice)
	info.instanceCount = C.uint(len(p.Placements))
	info.multiprocessorCount, info.copyEngineCount = C.uint(p.Multiprocessors), C.uint(p.CopyEngines)
	info.decoderCount, info.encoderCount = C.uint(p.Decoders), C.uint(p.Encoders)
	info.jpegCount, info.ofaCount, info.memorySizeMB = C.uint(p.JpegEngines), C.uint(p.OfaEngines),
		C.ulonglong(p.MemoryMiB)
	setText(info.name[:], "MIG "+p.Profile)
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetGpuInstancePossiblePlacements_v2
func nvmlDeviceGetGpuInstancePossiblePlacements_v2(h C.nvmlDevice_t, id C.uint,
	placements *C.nvmlGpuInstancePlacement_t, count *C.uint) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetGpuInstancePossiblePlacements_v2", h)
	if g == nil {
		return code
	}
	p := profile(g, id)
	if p == nil {
		return C.NVML_ERROR_NOT_SUPPORTED
	}
	if placements == nil { // the caller asks how many
		*count = C.uint(len(p.Placements))
		return C.NVML_SUCCESS
	}
	if int(*count) < len(p.Placements) {
		return C.NVML_ERROR_INSUFFICIENT_SIZE
	}
	out := unsafe.Slice(placements, len(p.Placements))
	for k, placement := range p.Placements {
		out[k].start, out[k].size = C.uint(placement[0]), C.uint(placement[1])
	}
	*count = C.uint(len(p.Placements))
	return C.NVML_SUCCESS
}
