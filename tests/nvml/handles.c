// Opaque handles NVML hands out, and the functions whose C signatures (const) cgo cannot export.
// go-nvml's header wraps each handle in a struct of one pointer: passed and returned as the
// pointer itself on every ABI NVML ships for, so callers built on NVIDIA's own header agree.
#include <string.h>
#include "nvml.h"
#include "handles.h"

// One byte per handle: a handle is an address only this library gives meaning to.
static char gpu_handles[MAX_GPUS];
static char mig_handles[MAX_GPUS * MAX_MIGS];
static char instance_handles[MAX_GPUS * MAX_MIGS];
static char compute_handles[MAX_GPUS * MAX_MIGS];
static char event_set;

nvmlDevice_t gpu_handle(unsigned int gpu) {
    nvmlDevice_t h = {(struct nvmlDevice_st *)(gpu_handles + gpu)};
    return h;
}
nvmlDevice_t mig_handle(unsigned int gpu, unsigned int mig) {
    nvmlDevice_t h = {(struct nvmlDevice_st *)(mig_handles + gpu * MAX_MIGS + mig)};
    return h;
}
nvmlGpuInstance_t instance_handle(unsigned int gpu, unsigned int mig) {
    nvmlGpuInstance_t h = {(struct nvmlGpuInstance_st *)(instance_handles + gpu * MAX_MIGS + mig)};
    return h;
}
nvmlComputeInstance_t compute_handle(unsigned int gpu, unsigned int mig) {
    nvmlComputeInstance_t h = {(struct nvmlComputeInstance_st *)(compute_handles + gpu * MAX_MIGS + mig)};
    return h;
}
nvmlEventSet_t the_event_set(void) {
    nvmlEventSet_t set = {(struct nvmlEventSet_st *)&event_set};
    return set;
}

// -1: not a handle of that kind.
int gpu_of(nvmlDevice_t h) {
    char *p = (char *)h.handle;
    return p >= gpu_handles && p < gpu_handles + MAX_GPUS ? (int)(p - gpu_handles) : -1;
}
int mig_of(nvmlDevice_t h) {
    char *p = (char *)h.handle;
    return p >= mig_handles && p < mig_handles + MAX_GPUS * MAX_MIGS ? (int)(p - mig_handles) : -1;
}
int instance_of(nvmlGpuInstance_t h) {
    char *p = (char *)h.handle;
    return p >= instance_handles && p < instance_handles + MAX_GPUS * MAX_MIGS ? (int)(p - instance_handles) : -1;
}
int compute_of(nvmlComputeInstance_t h) {
    char *p = (char *)h.handle;
    return p >= compute_handles && p < compute_handles + MAX_GPUS * MAX_MIGS ? (int)(p - compute_handles) : -1;
}
int is_event_set(nvmlEventSet_t set) { return (char *)set.handle == &event_set; }

void copy_text(char *to, unsigned int length, const char *from) {
    strncpy(to, from, length);
    if (length) to[length - 1] = 0;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t lookup_uuid(char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    return lookup_uuid((char *)uuid, device);
}
