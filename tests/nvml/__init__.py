"""An NVML of our own (library.py, README.md) and NVIDIA's device plugin and GPU feature
discovery built to run over it (nvidia.py), for the `nvidia` test tier."""
