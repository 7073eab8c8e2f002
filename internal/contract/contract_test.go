// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// TestAnswerCodesAreAnswers: no code of a transient failure, of a
// cancellation or of success is an answer, and no answer is listed twice.
func TestAnswerCodesAreAnswers(t *testing.T) {
	seen := map[codes.Code]bool{}
	for _, c := range AnswerCodes {
		switch c {
		case codes.OK, codes.Canceled, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
			codes.Aborted, codes.Internal, codes.Unavailable, codes.DataLoss:
			t.Errorf("%v is listed as an answer", c)
		}
		if seen[c] {
			t.Errorf("%v is listed twice", c)
		}
		seen[c] = true
	}
	if len(seen) != 8 {
		t.Errorf("%d answer codes, want 8", len(seen))
	}
}

// TestMaxHalfOpenProbesFitsSixteenBits: the breaker packs the probes
// admitted and succeeded in 16 bits each.
func TestMaxHalfOpenProbesFitsSixteenBits(t *testing.T) {
	if MaxHalfOpenProbes != 65535 {
		t.Errorf("MaxHalfOpenProbes = %d, want 65535", MaxHalfOpenProbes)
	}
}

// GoName and OptionName are each other's inverse over every field name
// of the policies, renamed or not.
func TestNamesRoundTrip(t *testing.T) {
	for option, goName := range map[string]string{
		"cool_down": "CoolDown", "circuit_breaker": "Breaker", "retry_budget": "Budget",
		"backoff_multiplier": "Multiplier", "fresh_ttl": "FreshTTL", "stale_ttl": "StaleTTL", "ttl": "TTL",
		"requests_per_second": "RequestsPerSecond", "k": "K", "max_refusal": "MaxRefusal",
		"generate_idempotency_key": "GenerateIdempotencyKey",
	} {
		if got := GoName(option); got != goName {
			t.Errorf("GoName(%q) = %q, want %q", option, got, goName)
		}
		if got := OptionName(goName); got != option {
			t.Errorf("OptionName(%q) = %q, want %q", goName, got, option)
		}
	}
}
