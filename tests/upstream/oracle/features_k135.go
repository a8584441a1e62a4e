//go:build k135

package main

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Kubernetes 1.35 defaults (pkg/features/kube_features.go): on are AdminAccess and PrioritizedList; off (alpha)
// are ConsumableCapacity, DeviceBindingConditions, DeviceTaints, PartitionableDevices.
var defaultAllocatorFeatures = structured.Features{
	AdminAccess:     true,
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

// failedOnNodeOnly: the error is ErrFailedAllocationOnNode's (this node only is unschedulable).
func failedOnNodeOnly(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
