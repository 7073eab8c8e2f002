package policy_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// full is a policy with every group set and every value away from its zero.
func full() policy.Service {
	codes := policy.CodesOf(codes.Unavailable)
	return policy.Service{
		Name:           "p.S",
		Budget:         &policy.Budget{Ratio: 0.1, MinRetries: 10, Window: time.Second},
		Breaker:        &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 5, Window: time.Second, WindowCalls: 10, CoolDown: time.Second, HalfOpenProbes: 1, SlowCallThreshold: time.Second, FailureCodes: codes},
		Bulkhead:       &policy.Bulkhead{Permits: 4, MaxWait: time.Millisecond},
		RateLimit:      &policy.RateLimit{RequestsPerSecond: 5, Burst: 5, MaxWait: time.Millisecond},
		AdaptiveLimit:  &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 4, InitialLimit: 2, Tolerance: 2, Smoothing: 0.5, BaselineWindow: time.Minute},
		ClientThrottle: &policy.Throttle{K: 2, Window: time.Second, MaxRefusal: 0.5},
		Methods: []policy.Method{{
			Name: "/p.S/Get", Idempotent: true, IdempotencyKey: "id", GenerateIdempotencyKey: true,
			Timeout: time.Second, OverallTimeout: 2 * time.Second,
			Retry:         &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, RetryableCodes: codes},
			Breaker:       &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 5, Window: time.Second, WindowCalls: 10, CoolDown: time.Second, HalfOpenProbes: 1, SlowCallThreshold: time.Second, FailureCodes: codes},
			Bulkhead:      &policy.Bulkhead{Permits: 1},
			Hedging:       &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2, NonFatalCodes: codes},
			RateLimit:     &policy.RateLimit{RequestsPerSecond: 1, Burst: 1, MaxWait: time.Millisecond},
			Cache:         &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 1, KeyFields: []string{"sku"}},
			AdaptiveLimit: &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 4, InitialLimit: 2, Tolerance: 2, Smoothing: 0.5, BaselineWindow: time.Minute},
			Priority:      policy.PriorityHigh,
		}},
	}
}

// Every key Settings writes is an option of resilient.v1.Policy, named
// as an annotation and an override write it, and every value option of
// each group it lists is there: a field added to a policy type with a
// name that is not its option's fails here.
func TestSettingsAreNamedAsTheOptions(t *testing.T) {
	p := full()
	md := (&resilientv1.Policy{}).ProtoReflect().Descriptor()
	seen := map[string]bool{}
	for _, s := range p.Settings() {
		key := s.Key
		if rest, ok := strings.CutPrefix(key, "methods.Get."); ok {
			key = rest
		} else if strings.HasPrefix(key, "methods.") {
			t.Errorf("%s: not under the method's name", s.Key)
			continue
		}
		seen[key] = true
		group, field, _ := strings.Cut(key, ".")
		gd := md.Fields().ByName(protoreflect.Name(group))
		if gd == nil {
			t.Errorf("%s: no option %q in resilient.v1.Policy", s.Key, group)
			continue
		}
		if field != "" && (gd.Message() == nil || gd.Message().Fields().ByName(protoreflect.Name(field)) == nil) {
			t.Errorf("%s: no option %q in %s", s.Key, field, gd.FullName())
		}
		if s.Value == "" || s.Value == "none" || s.Value == "0" {
			t.Errorf("%s = %q: a value set away from its zero is listed as it is", s.Key, s.Value)
		}
	}
	// Every value field of each group is listed.
	for _, group := range []string{"retry", "retry_budget", "circuit_breaker", "bulkhead", "hedging", "rate_limit", "cache", "adaptive_limit", "client_throttle"} {
		gd := md.Fields().ByName(protoreflect.Name(group)).Message()
		for i := range gd.Fields().Len() {
			fd := gd.Fields().Get(i)
			name := string(fd.Name())
			if name == "per_method" || name == "key_fields" {
				continue
			}
			if !seen[group+"."+name] {
				t.Errorf("Settings lists no %s.%s", group, name)
			}
		}
	}
}

// What is absent is listed so that adding it is a change: a missing
// retry and a missing shared breaker or bulkhead as "none", zero
// timeouts as "none"; a method's absent own breaker is not listed (it
// uses the service's).
func TestSettingsOfAbsentValues(t *testing.T) {
	p := policy.Service{Name: "p.S", Methods: []policy.Method{{Name: "/p.S/Get"}}}
	got := map[string]string{}
	for _, s := range p.Settings() {
		got[s.Key] = s.Value
	}
	want := map[string]string{
		"circuit_breaker": "none", "bulkhead": "none",
		"methods.Get.idempotent": "false", "methods.Get.idempotency_key": "none",
		"methods.Get.timeout": "none", "methods.Get.overall_timeout": "none", "methods.Get.retry": "none",
	}
	if len(got) != len(want) {
		t.Errorf("Settings = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
