module dra-bridge.test/nvml

go 1.26

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	gopkg.in/yaml.v3 v3.0.1
)
