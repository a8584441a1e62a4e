package main

/*
#cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"
#include "handles.h"
*/
import "C"

import "time"

// XID events: each GPU the description gives an xid reports it once, to the first waits after
// init; then each wait lasts its timeout and times out, as on a quiet node.

//export nvmlEventSetCreate
func nvmlEventSetCreate(set *C.nvmlEventSet_t) C.nvmlReturn_t {
	if n, code := enter("nvmlEventSetCreate"); n == nil {
		return code
	}
	*set = C.the_event_set()
	return C.NVML_SUCCESS
}

//export nvmlEventSetFree
func nvmlEventSetFree(set C.nvmlEventSet_t) C.nvmlReturn_t {
	if n, code := enter("nvmlEventSetFree"); n == nil {
		return code
	}
	if C.is_event_set(set) == 0 {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	return C.NVML_SUCCESS
}

//export nvmlDeviceGetSupportedEventTypes
func nvmlDeviceGetSupportedEventTypes(h C.nvmlDevice_t, types *C.ulonglong) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceGetSupportedEventTypes")
	if n == nil {
		return code
	}
	if g, code := device(n, h); g == nil {
		return code
	}
	*types = C.nvmlEventTypeXidCriticalError | C.nvmlEventTypeSingleBitEccError | C.nvmlEventTypeDoubleBitEccError
	return C.NVML_SUCCESS
}

//export nvmlDeviceRegisterEvents
func nvmlDeviceRegisterEvents(h C.nvmlDevice_t, types C.ulonglong, set C.nvmlEventSet_t) C.nvmlReturn_t {
	n, code := enter("nvmlDeviceRegisterEvents")
	if n == nil {
		return code
	}
	if g, code := device(n, h); g == nil {
		return code
	}
	if C.is_event_set(set) == 0 {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	return C.NVML_SUCCESS
}

//export nvmlEventSetWait_v2
func nvmlEventSetWait_v2(set C.nvmlEventSet_t, data *C.nvmlEventData_t, timeout C.uint) C.nvmlReturn_t {
	n, code := enter("nvmlEventSetWait_v2")
	if n == nil {
		return code
	}
	if C.is_event_set(set) == 0 {
		return C.NVML_ERROR_INVALID_ARGUMENT
	}
	mu.Lock()
	if len(pending) == 0 {
		mu.Unlock()
		// Nothing will come: wait the caller's timeout as NVML does, so a health loop does not spin.
		time.Sleep(time.Duration(timeout) * time.Millisecond)
		return C.NVML_ERROR_TIMEOUT
	}
	next := pending[0]
	pending = pending[1:]
	mu.Unlock()
	data.device, data.eventType = C.gpu_handle(C.uint(next.gpu)), C.nvmlEventTypeXidCriticalError
	data.eventData, data.gpuInstanceId, data.computeInstanceId = C.ulonglong(next.xid), 0xFFFFFFFF, 0xFFFFFFFF
	return C.NVML_SUCCESS
}
