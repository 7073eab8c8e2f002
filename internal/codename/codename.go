// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package codename spells gRPC status codes by their canonical names
// ("UNAVAILABLE", "DEADLINE_EXCEEDED"), as the .proto annotations, the gRPC
// service config and the override files write them. It is a leaf: the
// runtime, runtime/server, internal/rules and the plugin all use it, so
// that the plugin's binary does not link the runtime (and its metrics and
// rate-limit dependencies) for a table of names.
package codename

import (
	"fmt"

	"google.golang.org/grpc/codes"
)

// names are the canonical names of the codes, as the gRPC status code
// documentation and service config spell them: not derived from Go's
// names, which give "O_K" and "CANCELED".
var names = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// Of returns the canonical upper-case name of c ("UNAVAILABLE"), or
// "CODE(n)" for a number that is not a gRPC code.
func Of(c codes.Code) string {
	if int(c) >= len(names) {
		return fmt.Sprintf("CODE(%d)", uint32(c))
	}
	return names[c]
}

// Parse returns the code whose canonical name is name ("UNAVAILABLE"; "OK"
// included), and false for any other string: names are matched exactly.
func Parse(name string) (codes.Code, bool) {
	for c, n := range names {
		if n == name {
			return codes.Code(c), true
		}
	}
	return 0, false
}
