//go:build k136

package main

import "k8s.io/dynamic-resource-allocation/structured"

// Kubernetes 1.36 defaults (pkg/features/kube_features.go): on are AdminAccess, ConsumableCapacity,
// DeviceBindingConditions + ResourceClaimDeviceStatus, DeviceTaints, PartitionableDevices,
// PrioritizedList; off (alpha) is ListTypeAttributes.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}
