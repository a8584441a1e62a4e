//go:build k134

package main

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Kubernetes 1.34 defaults (pkg/features/kube_features.go): on are AdminAccess, PrioritizedList and
// ResourceClaimDeviceStatus; off (alpha) are ConsumableCapacity, DeviceBindingConditions,
// DeviceTaints, PartitionableDevices.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:     true,
	DeviceStatus:    true,
	PrioritizedList: true,
}

// celFeaturesOf: the release's CEL environment, with what a request turns on or off.
func celFeaturesOf(asked *celFeatures) cel.Features {
	features := cel.Features{EnableConsumableCapacity: false}
	if asked != nil && asked.ConsumableCapacity != nil {
		features.EnableConsumableCapacity = *asked.ConsumableCapacity
	}
	return features
}

// cacheFeatures: the CEL environment the scheduler compiles selectors in for these features.
func cacheFeatures(f structured.Features) cel.Features {
	return cel.Features{EnableConsumableCapacity: f.ConsumableCapacity}
}

// failedOnNodeOnly: 1.34's allocator has no node-only errors (ErrFailedAllocationOnNode came in 1.35).
func failedOnNodeOnly(error) bool { return false }
