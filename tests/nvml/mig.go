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
	i, j, m := instanceMig(n, instance)
	if m == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	info.device, info.id, info.profileId = C.gpu_handle(C.uint(i)), instanceID(j), C.uint(m.giProfileID())
	info.placement.start, info.placement.size = C.uint(m.PlacementStart), C.uint(m.placementSize())
	return C.NVML_SUCCESS
}

// profile: the MIG profile with that GI profile id this GPU can create (listed, or made by one
// of its MIG devices: NVML knows the profile of every instance that exists, which go-nvlib reads
// to name it). Only listed profiles have possible placements: the description's partitionable MIG.
func profile(g *gpu, id C.uint) *migProfile {
	for k := range g.MigProfiles {
		if C.uint(g.MigProfiles[k].GIProfileID) == id {
			return &g.MigProfiles[k]
		}
	}
	for _, m := range g.MigDevices {
		if C.uint(m.giProfileID()) == id {
			return &migProfile{Profile: m.Profile, GIProfileID: m.giProfileID(), MemoryMiB: m.MemoryMiB,
				Multiprocessors: m.Multiprocessors, CopyEngines: m.CopyEngines, Decoders: m.Decoders,
				Encoders: m.Encoders, JpegEngines: m.JpegEngines, OfaEngines: m.OfaEngines}
		}
	}
	return nil
}

//export nvmlDeviceGetGpuInstanceProfileInfo
func nvmlDeviceGetGpuInstanceProfileInfo(h C.nvmlDevice_t, id C.uint,
	info *C.nvmlGpuInstanceProfileInfo_t) C.nvmlReturn_t {
	var v2 C.nvmlGpuInstanceProfileInfo_v2_t
	if code := profileInfo("nvmlDeviceGetGpuInstanceProfileInfo", h, id, &v2); code != C.NVML_SUCCESS {
		return code
	}
	info.id, info.isP2pSupported, info.sliceCount, info.instanceCount = v2.id, v2.isP2pSupported, v2.sliceCount,
		v2.instanceCount
	info.multiprocessorCount, info.copyEngineCount = v2.multiprocessorCount, v2.copyEngineCount
	info.decoderCount, info.encoderCount, info.jpegCount = v2.decoderCount, v2.encoderCount, v2.jpegCount
	info.ofaCount, info.memorySizeMB = v2.ofaCount, v2.memorySizeMB
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetGpuInstanceProfileInfoV
func nvmlDeviceGetGpuInstanceProfileInfoV(h C.nvmlDevice_t, id C.uint,
	info *C.nvmlGpuInstanceProfileInfo_v2_t) C.nvmlReturn_t {
	return profileInfo("nvmlDeviceGetGpuInstanceProfileInfoV", h, id, info)
}

func profileInfo(function string, h C.nvmlDevice_t, id C.uint, info *C.nvmlGpuInstanceProfileInfo_v2_t) C.nvmlReturn_t {
	_, g, code := enterGPU(function, h)
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

//export nvmlDeviceGetComputeInstanceId
func nvmlDeviceGetComputeInstanceId(h C.nvmlDevice_t, id *C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetComputeInstanceId")
	if n == nil {
		return code
	}
	if _, _, ok := migOf(n, h); ok != C.NVML_SUCCESS {
		return C.NVML_ERROR_NOT_SUPPORTED // a whole GPU has no compute instance
	}
	*id = 0 // one compute instance per GPU instance, as MIG profiles without a <c>c. prefix make
	return C.NVML_SUCCESS
}
