//go:build !k134 && !k135 && !k136

package main

import "k8s.io/dynamic-resource-allocation/structured"

// Kubernetes 1.37 defaults (pkg/features/kube_features.go): on are AdminAccess, ConsumableCapacity,
// DeviceBindingConditions + ResourceClaimDeviceStatus, DeviceTaints, FractionalCapacityRange,
// PartitionableDevices, PrioritizedList; off (alpha) are CompatibilityGroups, DerivedAttributes,
// ListTypeAttributes, OptionalNodeOperations.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:             true,
	ConsumableCapacity:      true,
	DeviceBindingAndStatus:  true,
	DeviceTaints:            true,
	FractionalCapacityRange: true,
	PartitionableDevices:    true,
	PrioritizedList:         true,
}
