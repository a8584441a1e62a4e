//go:build k136

package main

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

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

// celFeaturesOf: the release's CEL environment, with what a request turns on or off.
func celFeaturesOf(asked *celFeatures) cel.Features {
	features := cel.Features{EnableConsumableCapacity: true}
	if asked != nil && asked.ConsumableCapacity != nil {
		features.EnableConsumableCapacity = *asked.ConsumableCapacity
	}
	if asked != nil && asked.ListTypeAttributes != nil {
		features.EnableListTypeAttributes = *asked.ListTypeAttributes
	}
	return features
}

// cacheFeatures: the CEL environment the scheduler compiles selectors in for these features.
func cacheFeatures(f structured.Features) cel.Features {
	return cel.Features{EnableConsumableCapacity: f.ConsumableCapacity, EnableListTypeAttributes: f.ListTypeAttributes}
}

// failedOnNodeOnly: the error is ErrFailedAllocationOnNode's (this node only is unschedulable).
func failedOnNodeOnly(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
