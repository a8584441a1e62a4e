//go:build k134

package main

import "k8s.io/dynamic-resource-allocation/structured"

// Kubernetes 1.34 defaults (pkg/features/kube_features.go): on are AdminAccess, PrioritizedList and
// ResourceClaimDeviceStatus; off (alpha) are ConsumableCapacity, DeviceBindingConditions,
// DeviceTaints, PartitionableDevices.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:     true,
	DeviceStatus:    true,
	PrioritizedList: true,
}
