//go:build k135

package main

import "k8s.io/dynamic-resource-allocation/structured"

// Kubernetes 1.35 defaults (pkg/features/kube_features.go): on are AdminAccess and PrioritizedList; off (alpha)
// are ConsumableCapacity, DeviceBindingConditions, DeviceTaints, PartitionableDevices.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:     true,
	PrioritizedList: true,
}
