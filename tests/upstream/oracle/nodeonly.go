//go:build !k134

package main

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/structured"
)

// failedOnNodeOnly: the error is ErrFailedAllocationOnNode's (this node only is unschedulable).
func failedOnNodeOnly(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
