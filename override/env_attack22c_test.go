// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22cEnvNameOfANameWithDoubleUnderscores: protobuf allows a
// package part or a method name to start or end with "_" (package
// shop._internal.v1, rpc Get__Stock), so that the service's part of a
// variable, or the method's, holds "__", the separator of the parts.
// The variable EnvName spells for such a value must be read as that value,
// never refused as an unknown service or method, nor read as another.
func TestAttack22cEnvNameOfANameWithDoubleUnderscores(t *testing.T) {
	p := &policy.Service{Name: "shop._internal.v1.Svc", Methods: []policy.Method{
		{Name: "/shop._internal.v1.Svc/Get__Stock", Idempotent: true, Timeout: time.Second},
		{Name: "/shop._internal.v1.Svc/Get", Idempotent: true, Timeout: time.Second},
	}}
	for _, c := range []struct {
		method, path, value string
		want                func(*policy.Service) bool
	}{
		{"", "timeout", "150ms", func(s *policy.Service) bool {
			return s.Methods[0].Timeout == 150*time.Millisecond && s.Methods[1].Timeout == 150*time.Millisecond
		}},
		{"Get__Stock", "timeout", "250ms", func(s *policy.Service) bool {
			return s.Methods[0].Timeout == 250*time.Millisecond && s.Methods[1].Timeout == time.Second
		}},
		{"Get", "retry.max_attempts", "2", func(s *policy.Service) bool {
			return s.Methods[0].Retry == nil && s.Methods[1].Retry != nil && s.Methods[1].Retry.MaxAttempts == 2
		}},
	} {
		name := override.EnvName(p.Name, c.method, c.path)
		set, err := override.Parse("", nil, []string{name + "=" + c.value}, p)
		if err != nil {
			t.Errorf("%s=%s: %v", name, c.value, err)
			continue
		}
		rt, err := runtime.NewClient(p, set.Options(p)...)
		if err != nil {
			t.Errorf("%s=%s: NewClient refused what the loader accepted: %v", name, c.value, err)
			continue
		}
		if got := rt.Policy(); !c.want(got) {
			t.Errorf("%s=%s: not in force as written: %+v", name, c.value, got.Methods)
		}
	}
}

// TestAttack22cEnvMisspeltFieldAfterADoubleUnderscoreName: a field misspelt
// after such a method's part is still an unknown field of that method,
// with its suggestion, not an unknown method or service.
func TestAttack22cEnvMisspeltFieldAfterADoubleUnderscoreName(t *testing.T) {
	p := &policy.Service{Name: "shop._internal.v1.Svc", Methods: []policy.Method{
		{Name: "/shop._internal.v1.Svc/Get__Stock", Idempotent: true},
		{Name: "/shop._internal.v1.Svc/Get", Idempotent: true},
	}}
	name := "RESILIENT__SHOP__INTERNAL_V1_SVC__METHODS__GET__STOCK__COOLDOWN"
	_, err := override.Parse("", nil, []string{name + "=5s"}, p)
	if err == nil {
		t.Fatalf("%s accepted", name)
	}
	if got := err.Error(); !strings.Contains(got, name+": unknown field") || strings.Contains(got, "unknown method") || strings.Contains(got, "unknown service") {
		t.Errorf("got %q, want %s: unknown field …", got, name)
	}
}

// TestAttack22cEnvServiceNamedLikeAField: beside service a.b, a service
// a.b_.timeout (protobuf allows lower-case service names) spells its
// part as a.b's part, "__" and TIMEOUT: RESILIENT__A_B__TIMEOUT, a.b's
// timeout, names no value of a.b_.timeout (it has no field), and stays
// a.b's.
func TestAttack22cEnvServiceNamedLikeAField(t *testing.T) {
	ab := &policy.Service{Name: "a.b", Methods: []policy.Method{{Name: "/a.b/Get", Idempotent: true, Timeout: time.Second}}}
	other := &policy.Service{Name: "a.b_.timeout", Methods: []policy.Method{{Name: "/a.b_.timeout/Get", Idempotent: true, Timeout: time.Second}}}
	set, err := override.Parse("", nil, []string{"RESILIENT__A_B__TIMEOUT=150ms"}, ab, other)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[*policy.Service]time.Duration{ab: 150 * time.Millisecond, other: time.Second} {
		rt, err := runtime.NewClient(p, set.Options(p)...)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if got := rt.Policy().Methods[0].Timeout; got != want {
			t.Errorf("%s: timeout %v, want %v", p.Name, got, want)
		}
	}
}
