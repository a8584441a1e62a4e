package main

/*
#cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"
#include "handles.h"
*/
import "C"

// One compute instance (id 0) per GPU instance, spanning its compute slices: what a MIG device
// of the description is. NVML's compute instance profile ids by compute slices.
var ciProfileIDs = map[uint32]C.uint{1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}

// located: the GPU and MIG device at a handle's offset (instance_of, compute_of); nil: none.
func located(n *node, k int) (int, int, *migDevice) {
	i, j := k/C.MAX_MIGS, k%C.MAX_MIGS
	if k < 0 || i >= len(n.GPUs) || j >= len(n.GPUs[i].MigDevices) {
		return 0, 0, nil
	}
	return i, j, &n.GPUs[i].MigDevices[j]
}

func instanceMig(n *node, instance C.nvmlGpuInstance_t) (int, int, *migDevice) {
	return located(n, int(C.instance_of(instance)))
}

//export nvmlGpuInstanceGetComputeInstanceById
func nvmlGpuInstanceGetComputeInstanceById(instance C.nvmlGpuInstance_t, id C.uint,
	compute *C.nvmlComputeInstance_t) C.nvmlReturn_t {
	n, code := enter("nvmlGpuInstanceGetComputeInstanceById")
	if n == nil {
		return code
	}
	i, j, m := instanceMig(n, instance)
	if m == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	if id != 0 {
		return C.NVML_ERROR_NOT_FOUND
	}
	*compute = C.compute_handle(C.uint(i), C.uint(j))
	return C.NVML_SUCCESS
}

//export nvmlComputeInstanceGetInfo_v2
func nvmlComputeInstanceGetInfo_v2(compute C.nvmlComputeInstance_t, info *C.nvmlComputeInstanceInfo_t) C.nvmlReturn_t {
	n, code := enter("nvmlComputeInstanceGetInfo_v2")
	if n == nil {
		return code
	}
	i, j, m := located(n, int(C.compute_of(compute)))
	if m == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	_, ci, _, _ := slices(m.Profile)
	info.device, info.gpuInstance = C.gpu_handle(C.uint(i)), C.instance_handle(C.uint(i), C.uint(j))
	info.id, info.profileId = 0, ciProfileIDs[ci]
	info.placement.start, info.placement.size = 0, C.uint(ci)
	return C.NVML_SUCCESS
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfo
func nvmlGpuInstanceGetComputeInstanceProfileInfo(instance C.nvmlGpuInstance_t, profile, engines C.uint,
	info *C.nvmlComputeInstanceProfileInfo_t) C.nvmlReturn_t {
	n, code := enter("nvmlGpuInstanceGetComputeInstanceProfileInfo")
	if n == nil {
		return code
	}
	_, _, m := instanceMig(n, instance)
	if m == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	_, ci, _, _ := slices(m.Profile)
	if profile != ciProfileIDs[ci] || engines != C.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
		return C.NVML_ERROR_NOT_SUPPORTED
	}
	info.id, info.sliceCount, info.instanceCount = profile, C.uint(ci), 1
	info.multiprocessorCount, info.sharedCopyEngineCount = C.uint(m.Multiprocessors), C.uint(m.CopyEngines)
	info.sharedDecoderCount, info.sharedEncoderCount = C.uint(m.Decoders), C.uint(m.Encoders)
	info.sharedJpegCount, info.sharedOfaCount = C.uint(m.JpegEngines), C.uint(m.OfaEngines)
	return C.NVML_SUCCESS
}
