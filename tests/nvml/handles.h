#define MAX_GPUS 64
#define MAX_MIGS 8
nvmlDevice_t gpu_handle(unsigned int gpu);
nvmlDevice_t mig_handle(unsigned int gpu, unsigned int mig);
nvmlGpuInstance_t instance_handle(unsigned int gpu, unsigned int mig);
nvmlComputeInstance_t compute_handle(unsigned int gpu, unsigned int mig);
nvmlEventSet_t the_event_set(void);
int compute_of(nvmlComputeInstance_t h);
int gpu_of(nvmlDevice_t h);
int mig_of(nvmlDevice_t h);
int instance_of(nvmlGpuInstance_t h);
int is_event_set(nvmlEventSet_t set);
void copy_text(char *to, unsigned int length, const char *from);
