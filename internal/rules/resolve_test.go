// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/contract"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// Fill writes each kind of value into the field of the same name, leaves
// the fields the options do not set as they were, and names a field it
// has no place for.
func TestFill(t *testing.T) {
	type breaker struct {
		FailureRatio   float64
		MinimumCalls   int
		CoolDown       time.Duration
		HalfOpenProbes int
		FailureCodes   []codes.Code // in the order written
		Window         time.Duration
	}
	b := breaker{Window: time.Minute}
	err := Fill(&b, &resilientv1.CircuitBreaker{
		FailureRatio: proto.Float64(0.25), MinimumCalls: proto.Uint32(7), CoolDown: durationpb.New(3 * time.Second),
		FailureCodes: []string{"INTERNAL", "UNAVAILABLE", "INTERNAL"}, PerMethod: proto.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := breaker{FailureRatio: 0.25, MinimumCalls: 7, CoolDown: 3 * time.Second, Window: time.Minute,
		FailureCodes: []codes.Code{codes.Internal, codes.Unavailable}}
	if b.FailureRatio != want.FailureRatio || b.MinimumCalls != want.MinimumCalls || b.CoolDown != want.CoolDown ||
		b.Window != want.Window || len(b.FailureCodes) != 2 || b.FailureCodes[0] != codes.Internal {
		t.Errorf("filled %+v, want %+v", b, want)
	}

	type set uint32
	var codesOnly struct{ RetryableCodes set }
	if err := Fill(&codesOnly, &resilientv1.Retry{RetryableCodes: []string{"UNAVAILABLE", "RESOURCE_EXHAUSTED"}}); err != nil {
		t.Fatal(err)
	}
	if codesOnly.RetryableCodes != 1<<codes.Unavailable|1<<codes.ResourceExhausted {
		t.Errorf("code set %b", codesOnly.RetryableCodes)
	}

	var short struct{ MaxAttempts int }
	err = Fill(&short, &resilientv1.Retry{MaxAttempts: proto.Uint32(2), BackoffMultiplier: proto.Float64(3)})
	if err == nil || !strings.Contains(err.Error(), "backoff_multiplier") || short.MaxAttempts != 2 {
		t.Errorf("error %v, attempts %d: want backoff_multiplier named and the rest written", err, short.MaxAttempts)
	}
	if Fill(&short, nil) != nil || Fill(&short, (*resilientv1.Retry)(nil)) != nil {
		t.Error("nothing to fill is not an error")
	}
}

// The table of defaults, read from the options' default_value, fills
// the Go values the runtime gets: the contract's defaults as users know
// them (a change of one here is a change of the contract), only for the
// groups that have some.
func TestDefaultsTable(t *testing.T) {
	var r struct {
		MaxAttempts    int
		InitialBackoff time.Duration
		MaxBackoff     time.Duration
		Multiplier     float64
		RetryableCodes []codes.Code
	}
	if err := Fill(&r, DefaultOf("retry")); err != nil {
		t.Fatal(err)
	}
	if r.MaxAttempts != 3 || r.InitialBackoff != 50*time.Millisecond || r.MaxBackoff != time.Second ||
		r.Multiplier != 2 || len(r.RetryableCodes) != 1 || r.RetryableCodes[0] != codes.Unavailable {
		t.Errorf("retry defaults %+v", r)
	}
	var cb struct {
		FailureRatio   float64
		MinimumCalls   int
		Window         time.Duration
		CoolDown       time.Duration
		HalfOpenProbes int
		FailureCodes   []codes.Code
	}
	if err := Fill(&cb, DefaultOf("circuit_breaker")); err != nil {
		t.Fatal(err)
	}
	if cb.FailureRatio != 0.5 || cb.MinimumCalls != 20 || cb.Window != 10*time.Second || cb.CoolDown != 10*time.Second ||
		cb.HalfOpenProbes != 3 || len(cb.FailureCodes) != 2 || cb.FailureCodes[0] != codes.Unavailable || cb.FailureCodes[1] != codes.DeadlineExceeded {
		t.Errorf("breaker defaults %+v", cb)
	}
	var h struct {
		Delay         time.Duration
		MaxCopies     int
		NonFatalCodes []codes.Code
	}
	if err := Fill(&h, DefaultOf("hedging")); err != nil || h.Delay != 0 || h.MaxCopies != 2 || len(h.NonFatalCodes) != 1 || h.NonFatalCodes[0] != codes.Unavailable {
		t.Errorf("hedging defaults %+v (%v)", h, err)
	}
	var d struct {
		TTL   time.Duration
		Lease time.Duration
	}
	var sh struct {
		Pushback time.Duration
		Code     codes.Code
	}
	if err := Fill(&d, DefaultOf("server.dedup")); err != nil || d.Lease != contract.Lease || d.TTL != 0 {
		t.Errorf("dedup defaults %+v (%v)", d, err)
	}
	if err := Fill(&sh, DefaultOf("shedding")); err != nil || sh.Pushback != contract.ShedPushback || sh.Code != codes.Unavailable {
		t.Errorf("shedding defaults %+v (%v)", sh, err)
	}
	for _, group := range []string{"bulkhead", "rate_limit", "nonsense", "timeout", "server.dedup.ttl"} {
		if DefaultOf(group) != nil {
			t.Errorf("DefaultOf(%q) = %v, want none", group, DefaultOf(group))
		}
	}
	if contract.GoName("cool_down") != "CoolDown" || contract.GoName("fresh_ttl") != "FreshTTL" || contract.GoName("backoff_multiplier") != "Multiplier" {
		t.Error("GoName")
	}
}
