//go:build tools

// `helm template` for the chart tests is built from Helm's own module (helm.sh/helm/v4/cmd/helm);
// importing it keeps go.mod complete.
package tools

import (
	_ "helm.sh/helm/v4/pkg/cmd"
)
