// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import "strings"

// MethodList names, in a message, the methods of a service of n methods
// that a problem holds for: "Get", "Get and List", "Get, List and Put",
// "each method" (all of several). The plugin, lint and the override
// loader word a value of the service wrong for several methods alike.
func MethodList(names []string, n int) string {
	if len(names) == n && n > 1 {
		return "each method"
	}
	return AndList(names)
}

// AndList joins names as a list in prose: "a", "a and b", "a, b and c".
func AndList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
