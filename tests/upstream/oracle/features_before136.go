//go:build k134 || k135

package main

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Before 1.36 the CEL environment has no list-typed attributes.
func setListTypeAttributes(*cel.Features, bool) {}

func cacheFeatures(f structured.Features) cel.Features {
	return cel.Features{EnableConsumableCapacity: f.ConsumableCapacity}
}
