//go:build !k134 && !k135

package main

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func setListTypeAttributes(f *cel.Features, on bool) { f.EnableListTypeAttributes = on }

// cacheFeatures: the CEL environment the scheduler compiles selectors in for these features.
func cacheFeatures(f structured.Features) cel.Features {
	return cel.Features{EnableConsumableCapacity: f.ConsumableCapacity, EnableListTypeAttributes: f.ListTypeAttributes}
}
