//go:build tools

// KWOK is built from its module's main package (sigs.k8s.io/kwok/cmd/kwok); importing it keeps
// go.mod complete.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
