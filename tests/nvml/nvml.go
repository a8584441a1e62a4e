// An NVML of our own: libnvidia-ml.so.1 serving a node described in YAML (description.go), so
// the reporter, NVIDIA's device plugin and GFD run their real NVML code on machines without a
// GPU. What each function answers, and what it does not serve, is in README.md.
package main

/*
#cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS
#include <stdlib.h>
#include "nvml.h"
#include "handles.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// FailEnv names functions to fail: "nvmlDeviceGetUUID" (NVML_ERROR_UNKNOWN) or "name=code".
const FailEnv = "DRA_BRIDGE_NVML_FAIL"

var (
	mu      sync.Mutex
	the     *node
	opened  int
	failing map[string]C.nvmlReturn_t
	pending []event // XID events not yet waited for
)

type event struct {
	gpu uint32
	xid uint64
}

func main() {}

// start reads the description on the first init; later inits count references, as NVML's do.
func start() C.nvmlReturn_t {
	mu.Lock()
	defer mu.Unlock()
	if opened > 0 {
		opened++
		return C.NVML_SUCCESS
	}
	path := os.Getenv(DescriptionEnv)
	if path == "" {
		fmt.Fprintf(os.Stderr, "libnvidia-ml (dra-bridge test NVML): %s is not set: no node to serve\n", DescriptionEnv)
		return C.NVML_ERROR_DRIVER_NOT_LOADED
	}
	n, err := readNode(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "libnvidia-ml (dra-bridge test NVML): %v\n", err)
		return C.NVML_ERROR_DRIVER_NOT_LOADED
	}
	if len(n.GPUs) > C.MAX_GPUS {
		fmt.Fprintf(os.Stderr, "libnvidia-ml (dra-bridge test NVML): at most %d GPUs\n", C.MAX_GPUS)
		return C.NVML_ERROR_DRIVER_NOT_LOADED
	}
	failing = map[string]C.nvmlReturn_t{}
	for _, item := range strings.Split(os.Getenv(FailEnv), ",") {
		name, code, found := strings.Cut(strings.TrimSpace(item), "=")
		if name == "" {
			continue
		}
		failing[name] = C.NVML_ERROR_UNKNOWN
		if found {
			value, err := strconv.Atoi(code)
			if err != nil {
				fmt.Fprintf(os.Stderr, "libnvidia-ml (dra-bridge test NVML): %s: %q is not a return code\n", FailEnv, item)
				return C.NVML_ERROR_DRIVER_NOT_LOADED
			}
			failing[name] = C.nvmlReturn_t(value)
		}
	}
	pending = nil
	for i := range n.GPUs {
		if xid := n.GPUs[i].reportedXid(); xid != 0 {
			pending = append(pending, event{uint32(i), xid})
		}
	}
	the, opened = n, 1
	return C.NVML_SUCCESS
}

// enter: the node, or the code the call answers (not initialized, or failed on purpose).
func enter(function string) (*node, C.nvmlReturn_t) {
	mu.Lock()
	defer mu.Unlock()
	if the == nil {
		return nil, C.NVML_ERROR_UNINITIALIZED
	}
	if code, ok := failing[function]; ok {
		return nil, code
	}
	return the, C.NVML_SUCCESS
}

// enterGPU: enter, then the GPU the handle names.
func enterGPU(function string, h C.nvmlDevice_t) (*node, *gpu, C.nvmlReturn_t) {
	n, code := enter(function)
	if n == nil {
		return nil, nil, code
	}
	g, code := device(n, h)
	return n, g, code
}

func device(n *node, h C.nvmlDevice_t) (*gpu, C.nvmlReturn_t) {
	i := int(C.gpu_of(h))
	if i < 0 || i >= len(n.GPUs) {
		return nil, C.NVML_ERROR_INVALID_ARGUMENT
	}
	return &n.GPUs[i], C.NVML_SUCCESS
}

// migDevice: a MIG handle's device and its parent's index.
func migOf(n *node, h C.nvmlDevice_t) (*migDevice, int, C.nvmlReturn_t) {
	i, _, m := located(n, int(C.mig_of(h)))
	if m == nil {
		return nil, 0, C.NVML_ERROR_INVALID_ARGUMENT
	}
	return m, i, C.NVML_SUCCESS
}

func text(to *C.char, length C.uint, value string) C.nvmlReturn_t {
	if to == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	if uint(len(value)) >= uint(length) {
		return C.NVML_ERROR_INSUFFICIENT_SIZE
	}
	from := C.CString(value)
	defer C.free(unsafe.Pointer(from))
	C.copy_text(to, length, from)
	return C.NVML_SUCCESS
}

//export nvmlInit_v2
func nvmlInit_v2() C.nvmlReturn_t { return start() }

//export nvmlInitWithFlags
func nvmlInitWithFlags(flags C.uint) C.nvmlReturn_t { return start() }

//export nvmlShutdown
func nvmlShutdown() C.nvmlReturn_t {
	mu.Lock()
	defer mu.Unlock()
	if opened == 0 {
		return C.NVML_ERROR_UNINITIALIZED
	}
	if opened--; opened == 0 {
		the = nil
	}
	return C.NVML_SUCCESS
}

//export nvmlSystemGetDriverVersion
func nvmlSystemGetDriverVersion(version *C.char, length C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlSystemGetDriverVersion")
	if n == nil {
		return code
	}
	return text(version, length, n.DriverVersion)
}

//export nvmlSystemGetCudaDriverVersion_v2
func nvmlSystemGetCudaDriverVersion_v2(version *C.int) C.nvmlReturn_t {
	n, code := enter("nvmlSystemGetCudaDriverVersion_v2")
	if n == nil {
		return code
	}
	major, minor, _ := strings.Cut(n.CudaDriverVersion, ".")
	a, errA := strconv.Atoi(major)
	b, errB := strconv.Atoi(minor)
	if errA != nil || errB != nil || version == nil {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	*version = C.int(a*1000 + b*10) // 13.0 -> 13000, as cudaDriverGetVersion
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetCount_v2
func nvmlDeviceGetCount_v2(count *C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetCount_v2")
	if n == nil {
		return code
	}
	*count = C.uint(len(n.GPUs))
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetHandleByIndex_v2
func nvmlDeviceGetHandleByIndex_v2(index C.uint, h *C.nvmlDevice_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetHandleByIndex_v2")
	if n == nil {
		return code
	}
	if int(index) >= len(n.GPUs) {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	*h = C.gpu_handle(index)
	return C.NVML_SUCCESS
}

//export lookup_uuid
func lookup_uuid(uuid *C.char, h *C.nvmlDevice_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetHandleByUUID")
	if n == nil {
		return code
	}
	wanted := C.GoString(uuid)
	for i := range n.GPUs {
		if n.GPUs[i].UUID == wanted {
			*h = C.gpu_handle(C.uint(i))
			return C.NVML_SUCCESS
		}
		for j := range n.GPUs[i].MigDevices {
			if n.GPUs[i].MigDevices[j].UUID == wanted {
				*h = C.mig_handle(C.uint(i), C.uint(j))
				return C.NVML_SUCCESS
			}
		}
	}
	return C.NVML_ERROR_NOT_FOUND
}

//export nvmlDeviceGetUUID
func nvmlDeviceGetUUID(h C.nvmlDevice_t, uuid *C.char, length C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetUUID")
	if n == nil {
		return code
	}
	if m, _, ok := migOf(n, h); ok == C.NVML_SUCCESS {
		return text(uuid, length, m.UUID)
	}
	g, code := device(n, h)
	if g == nil {
		return code
	}
	return text(uuid, length, g.UUID)
}

//export nvmlDeviceGetName
func nvmlDeviceGetName(h C.nvmlDevice_t, name *C.char, length C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetName")
	if n == nil {
		return code
	}
	if m, parent, ok := migOf(n, h); ok == C.NVML_SUCCESS {
		return text(name, length, n.GPUs[parent].ProductName+" MIG "+m.Profile)
	}
	g, code := device(n, h)
	if g == nil {
		return code
	}
	return text(name, length, g.ProductName)
}

//export nvmlDeviceGetMinorNumber
func nvmlDeviceGetMinorNumber(h C.nvmlDevice_t, minor *C.uint) C.nvmlReturn_t {
	_, g, code := enterGPU("nvmlDeviceGetMinorNumber", h)
	if g == nil {
		return code
	}
	*minor = C.uint(g.minor())
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetMemoryInfo
func nvmlDeviceGetMemoryInfo(h C.nvmlDevice_t, memory *C.nvmlMemory_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetMemoryInfo")
	if n == nil {
		return code
	}
	total := uint64(0)
	if m, _, ok := migOf(n, h); ok == C.NVML_SUCCESS {
		total = m.MemoryMiB << 20
	} else if g, code := device(n, h); g != nil {
		total = g.MemoryMiB << 20
	} else {
		return code
	}
	memory.total, memory.free, memory.used = C.ulonglong(total), C.ulonglong(total), 0
	return C.NVML_SUCCESS
}

//export nvmlSystemGetCudaDriverVersion
func nvmlSystemGetCudaDriverVersion(version *C.int) C.nvmlReturn_t {
	return nvmlSystemGetCudaDriverVersion_v2(version)
}
