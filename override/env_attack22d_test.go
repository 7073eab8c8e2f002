// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package override_test

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22dEnvNameReadAsOneOfTwoReadings: a name whose "__" makes
// the variable of one value read also as another's, whose first part is
// a group of the annotation but whose path names nothing: method Get's
// RETRY__TIMEOUT beside method Get__Retry's TIMEOUT, service a.b's
// RETRY__TIMEOUT beside service a.b_.retry's TIMEOUT. Only one of the
// two readings names a value (retry has no timeout); the variable
// EnvName spells must be read as that one. Before, both were taken as
// plausible (the first part was checked alone) and the variable refused
// as meaning either.
func TestAttack22dEnvNameReadAsOneOfTwoReadings(t *testing.T) {
	svc := &policy.Service{Name: "shop.v1.Svc", Methods: []policy.Method{
		{Name: "/shop.v1.Svc/Get", Idempotent: true, Timeout: time.Second},
		{Name: "/shop.v1.Svc/Get__Retry", Idempotent: true, Timeout: time.Second},
	}}
	ab := &policy.Service{Name: "a.b", Methods: []policy.Method{{Name: "/a.b/Get", Idempotent: true, Timeout: time.Second}}}
	abRetry := &policy.Service{Name: "a.b_.retry", Methods: []policy.Method{{Name: "/a.b_.retry/Get", Idempotent: true, Timeout: time.Second}}}

	for _, c := range []struct {
		name     string
		services []*policy.Service
		service  string
		method   string
		want     map[*policy.Service][]time.Duration // each method's timeout
	}{
		{"method Get__Retry beside Get", []*policy.Service{svc}, svc.Name, "Get__Retry",
			map[*policy.Service][]time.Duration{svc: {time.Second, 150 * time.Millisecond}}},
		{"service a.b_.retry beside a.b", []*policy.Service{ab, abRetry}, abRetry.Name, "",
			map[*policy.Service][]time.Duration{ab: {time.Second}, abRetry: {150 * time.Millisecond}}},
	} {
		v := override.EnvName(c.service, c.method, "timeout")
		set, err := override.Parse("", nil, []string{v + "=150ms"}, c.services...)
		if err != nil {
			t.Errorf("%s: %s: %v", c.name, v, err)
			continue
		}
		for p, want := range c.want {
			rt, err := runtime.NewClient(p, set.Options(p)...)
			if err != nil {
				t.Fatalf("%s: %s: %v", c.name, p.Name, err)
			}
			for i, m := range rt.Policy().Methods {
				if m.Timeout != want[i] {
					t.Errorf("%s: %s: %s timeout %v, want %v", c.name, v, m.Name, m.Timeout, want[i])
				}
			}
		}
	}
	// Get's retry.max_attempts is Get's (Get__Retry has no max_attempts).
	set, err := override.Parse("", nil, []string{"RESILIENT__SHOP_V1_SVC__METHODS__GET__RETRY__MAX_ATTEMPTS=2"}, svc)
	if err != nil {
		t.Fatalf("Get's retry.max_attempts refused: %v", err)
	}
	rt, err := runtime.NewClient(svc, set.Options(svc)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Policy().Methods; got[0].Retry == nil || got[0].Retry.MaxAttempts != 2 || got[1].Retry != nil {
		t.Errorf("retry.max_attempts=2 of Get: Get %+v, Get__Retry %+v", got[0].Retry, got[1].Retry)
	}
}

// TestAttack22dEnvNameTwoValuesAreRefused: two services whose variables
// both name a value (a.b's and a_b's: A_B) stay refused as ambiguous.
func TestAttack22dEnvNameTwoValuesAreRefused(t *testing.T) {
	one := &policy.Service{Name: "a.b", Methods: []policy.Method{{Name: "/a.b/Get", Idempotent: true}}}
	two := &policy.Service{Name: "a_b", Methods: []policy.Method{{Name: "/a_b/Get", Idempotent: true}}}
	if _, err := override.Parse("", nil, []string{"RESILIENT__A_B__TIMEOUT=150ms"}, one, two); err == nil {
		t.Error("RESILIENT__A_B__TIMEOUT, a.b's and a_b's, accepted")
	}
}
