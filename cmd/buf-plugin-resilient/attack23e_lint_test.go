// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

// TestAttack23eLintSameWireRetype: a copy of the options whose
// max_attempts is a sint32, a type of the same wire type as the uint32 of
// this lint plugin: the value parses, as another one (3 is read as 6), and
// lint checked 6 and said nothing. It now reports the copy's type and its
// own, as for any retyped field (rules.NewerOptions).
func TestAttack23eLintSameWireRetype(t *testing.T) {
	lintRetypedMaxAttempts(t, "sint32", "3")
}
