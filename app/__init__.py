"""dra-bridge: migrate device-plugin GPU workloads onto Kubernetes DRA at admission."""

__version__ = "0.1.0"
