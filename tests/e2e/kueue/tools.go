//go:build tools

// Kueue's manager is built from its module (sigs.k8s.io/kueue/cmd/kueue) for the e2e tier;
// importing it keeps go.mod complete.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
