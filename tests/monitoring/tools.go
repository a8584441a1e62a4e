//go:build tools

// `promtool` for the alert-rule tests is built from Prometheus's own module
// (github.com/prometheus/prometheus/cmd/promtool); importing it keeps go.mod complete.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
