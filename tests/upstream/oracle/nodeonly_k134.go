//go:build k134

package main

// failedOnNodeOnly: 1.34's allocator has no node-only errors (ErrFailedAllocationOnNode came in 1.35).
func failedOnNodeOnly(error) bool { return false }
