// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
)

// TestAttack22dImportNamedLikeAParameter: request types of Go packages
// imported as opts and c, the constructor's other locals (attack22c tried
// rt, err, cc and inner), with a key and a cache key: the resilient client
// must compile wherever protoc-gen-go-grpc's does. (A package imported as
// in, the key functions' parameter, or as opts or c for a response, breaks
// protoc-gen-go-grpc's own code, and is not tried.)
func TestAttack22dImportNamedLikeAParameter(t *testing.T) {
	compileTestdata(t, "attack22d", "alias/svc.proto", "alias/opts.proto", "alias/c.proto", "alias/out.proto")
}
