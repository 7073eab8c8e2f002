// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// A code set holding a number gRPC defines no code for (17 to 31) cannot
// be written in a .proto or an override (a code is written by its name,
// and an unknown name is refused there); in Go it is refused too, and a
// breaker whose only failure code is such a number, which could never
// open, is not taken for one that can. (Validate accepted them.)
func TestAttackSpineUnknownCodesRefused(t *testing.T) {
	const bogus = policy.CodeSet(1 << 20)
	unavailable := policy.CodesOf(codes.Unavailable)
	for name, tc := range map[string]struct {
		edit  func(p *policy.Service)
		field string
	}{
		"retryable": {func(p *policy.Service) {
			p.Methods[0].Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: 1, MaxBackoff: 1, Multiplier: 1, RetryableCodes: unavailable | bogus}
		}, "Retry.RetryableCodes"},
		"failure": {func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: bogus}
		}, "Breaker.FailureCodes"},
		"non-fatal": {func(p *policy.Service) {
			p.Methods[0].Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2, NonFatalCodes: bogus}
		}, "Hedging.NonFatalCodes"},
	} {
		t.Run(name, func(t *testing.T) {
			p := policy.Service{Name: "pkg.S", Methods: []policy.Method{{Name: "/pkg.S/M", Idempotent: true, Timeout: time.Second}}}
			tc.edit(&p)
			err := p.Validate()
			if err == nil {
				t.Fatalf("Validate accepts %s holding code 20, which gRPC does not define and no .proto or override can write", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "20") {
				t.Errorf("err = %v, want it to name %s and the code 20", err, tc.field)
			}
		})
	}
}
