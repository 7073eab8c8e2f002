// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// full is a policy with every pointer set and every slice non-empty, so
// that a shallow copy anywhere in Clone shows.
func fullPolicy() policy.Service {
	return policy.Service{
		Name:           "pkg.S",
		Budget:         &policy.Budget{Ratio: 0.1, MinRetries: 1, Window: time.Second},
		Breaker:        &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: 1 << 14},
		Bulkhead:       &policy.Bulkhead{Permits: 4},
		RateLimit:      &policy.RateLimit{RequestsPerSecond: 1, Burst: 1},
		AdaptiveLimit:  &policy.AdaptiveLimit{MaxLimit: 4},
		ClientThrottle: &policy.Throttle{K: 2},
		Methods: []policy.Method{{
			Name: "/pkg.S/A", Idempotent: true, Timeout: time.Second,
			Retry:         &policy.Retry{MaxAttempts: 2, InitialBackoff: 1, MaxBackoff: 2, Multiplier: 2, RetryableCodes: 1 << 14},
			Breaker:       &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: 1 << 14},
			Bulkhead:      &policy.Bulkhead{Permits: 2},
			Hedging:       &policy.Hedging{Delay: 1, MaxCopies: 2},
			RateLimit:     &policy.RateLimit{RequestsPerSecond: 1, Burst: 1},
			Cache:         &policy.Cache{FreshTTL: 1, StaleTTL: 1, MaxEntries: 1, KeyFields: []string{"sku", "warehouse"}},
			AdaptiveLimit: &policy.AdaptiveLimit{MaxLimit: 2},
			Priority:      policy.PriorityHigh,
		}, {Name: "/pkg.S/B"}},
	}
}

// scribble changes every value reachable from v in place: through
// pointers, into slices' elements, every number, string and bool.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

// unset names the first pointer, slice or map reachable from v (at path)
// that is nil or empty, "" for none: a field added to the policy types and
// left out of fullPolicy or fullServer (settings_test.go), which Clone's tests would then
// not attack. Functions (NewResponse) are shared by a clone, not copied.
func unset(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return path
		}
		return unset(v.Elem(), path)
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return path
		}
		return unset(v.Index(0), path+"[0]")
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				if p := unset(v.Field(i), path+"."+f.Name); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

func TestAttackSpineCloneTestsAreFull(t *testing.T) {
	s, srv := fullPolicy(), fullServer()
	if p := unset(reflect.ValueOf(s), "Service"); p != "" {
		t.Errorf("fullPolicy leaves %s unset: set it, so that a shallow copy of it by Clone shows", p)
	}
	if p := unset(reflect.ValueOf(srv), "Server"); p != "" {
		t.Errorf("fullServer leaves %s unset: set it, so that a shallow copy of it by Clone shows", p)
	}
}

// Server.Clone is deep: a change anywhere in the copy leaves the original
// as it was.
func TestAttackSpineServerCloneIsDeep(t *testing.T) {
	orig := fullServer()
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("the clone differs from the original:\n%+v\n%+v", c, orig)
	}
	scribble(reflect.ValueOf(&c))
	if reflect.DeepEqual(c, orig) {
		t.Fatal("scribble changed nothing: the test cannot fail")
	}
	if want := fullServer(); !reflect.DeepEqual(orig, want) {
		t.Errorf("changing the clone changed the original:\n got %+v\nwant %+v", orig, want)
	}
}

// Clone is deep: a change anywhere in the copy, KeyFields included (a
// shallow copy shared them, and an edit of them reached the generated
// literal), leaves the original as it was.
func TestAttackSpineCloneIsDeep(t *testing.T) {
	orig := fullPolicy()
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("the clone differs from the original:\n%+v\n%+v", c, orig)
	}
	scribble(reflect.ValueOf(&c))
	if reflect.DeepEqual(c, orig) {
		t.Fatal("scribble changed nothing: the test cannot fail")
	}
	if want := fullPolicy(); !reflect.DeepEqual(orig, want) {
		t.Errorf("changing the clone changed the original:\n got %+v\nwant %+v", orig.Methods[0].Cache, want.Methods[0].Cache)
	}
	// Growing the copy's slices leaves the original's too.
	c = orig.Clone()
	c.Methods = append(c.Methods[:1], policy.Method{Name: "/pkg.S/C"})
	c.Methods[0].Cache.KeyFields = append(c.Methods[0].Cache.KeyFields[:1], "other")
	if want := fullPolicy(); !reflect.DeepEqual(orig, want) {
		t.Errorf("appending to the clone's slices changed the original: %+v", orig.Methods)
	}
}

// A clone of a clone is as deep, and a nil KeyFields stays nil (an edit
// comparing KeyFields with slices.Equal sees no change).
func TestAttackSpineCloneKeepsNilKeyFields(t *testing.T) {
	p := fullPolicy()
	p.Methods[0].Cache.KeyFields = nil
	c := p.Clone()
	if c.Methods[0].Cache.KeyFields != nil {
		t.Errorf("KeyFields became %#v", c.Methods[0].Cache.KeyFields)
	}
	var empty policy.Service
	if e := empty.Clone(); len(e.Methods) != 0 {
		t.Errorf("the clone of an empty policy has %d methods", len(e.Methods))
	}
}

// A program that overwrote DefaultBudget with nonsense gets its retrying
// policies refused, not run with it unchecked.
func TestValidateChecksTheDefaultBudgetInForce(t *testing.T) {
	saved := policy.DefaultBudget
	defer func() { policy.DefaultBudget = saved }()
	policy.DefaultBudget.Ratio = -1
	p := policy.Service{Name: "p.S", Methods: []policy.Method{{Name: "/p.S/Get", Idempotent: true,
		Retry: &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Second, Multiplier: 2}}}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "Budget.Ratio") {
		t.Errorf("Validate with a broken DefaultBudget: %v, want Budget.Ratio refused", err)
	}
	p.Methods[0].Retry = nil
	if err := p.Validate(); err != nil {
		t.Errorf("a policy that never retries uses no budget: %v", err)
	}
}
