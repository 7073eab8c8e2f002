// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"strings"

	"github.com/go-resilient/resilient/runtime/internal/priority"
)

// sharedHeaders are metadata keys that every request carries, set by the
// transport, the client library, a proxy or the runtime, with one value
// for every request of a caller (its credentials, its session, its
// address) or of every caller: an idempotency key read from one would
// make every request of a caller one request, and refuse its second order
// as "a different request".
var sharedHeaders = map[string]bool{
	"content-type":    true,
	"user-agent":      true,
	"te":              true,
	"authorization":   true,
	"cookie":          true,
	"x-forwarded-for": true,
	"x-real-ip":       true,
	"forwarded":       true,
	priority.Header:   true,
}

// dedupHeaderProblem says what is wrong with h as Dedup.Header, "" when
// nothing is: it must be a text metadata key gRPC carries (lower-case
// letters, digits, '-', '_' and '.'; not grpc-…, which gRPC reserves, nor
// …-bin, which it decodes as binary), and not one of the keys every
// request carries (sharedHeaders, or a pseudo-header such as :authority).
func dedupHeaderProblem(h string) string {
	if strings.HasPrefix(h, ":") || sharedHeaders[h] {
		return "is a header every request carries, with the same value for every request of a caller: every request would share one idempotency key; name a header of its own, such as idempotency-key (empty for it)"
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "is not a valid text metadata key: lower-case letters, digits, '-', '_' and '.' only, not grpc-…, not …-bin"
		}
	}
	if strings.HasPrefix(h, "grpc-") || strings.HasSuffix(h, "-bin") {
		return "is not a valid text metadata key: lower-case letters, digits, '-', '_' and '.' only, not grpc-…, not …-bin"
	}
	return ""
}
