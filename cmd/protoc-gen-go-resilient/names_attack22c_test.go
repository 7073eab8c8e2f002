// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
)

// TestAttack22cImportNamedLikeALocal: a method's request and response are
// messages of a Go package whose import path ends in rt, err, cc or inner.
// protogen imports such a package under that name, and protoc-gen-go-grpc's
// client compiles with it; the README promises the resilient client
// compiles beside it.
func TestAttack22cImportNamedLikeALocal(t *testing.T) {
	compileTestdata(t, "attack22c", "alias/svc.proto", "alias/rt.proto", "alias/err.proto", "alias/cc.proto", "alias/inner.proto")
}
