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

// fullServer is a server-side policy with every value away from its zero
// and its default.
func fullServer() policy.Server {
	return policy.Server{
		Name: "p.S",
		Shedding: &policy.Shedding{
			Limits:   policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4},
			Pushback: 3 * time.Second, Code: codes.ResourceExhausted,
		},
		Methods: []policy.ServerMethod{{
			Name: "/p.S/Get", Priority: policy.PriorityHigh, MinDeadline: time.Millisecond, DefaultTimeout: time.Second,
			Dedup: &policy.Dedup{Header: "x-key", TTL: time.Hour, Lease: time.Minute, OnStoreError: policy.StoreErrorRunWithoutDedup,
				FinalCodes: policy.CodesOf(codes.NotFound)},
		}},
	}
}

// Every key Server.Settings writes is an option of resilient.v1.Policy
// (shedding at the service, server under a method), and every option of
// shedding and server is listed: a server-side field named apart from its
// option fails here.
func TestServerSettingsAreNamedAsTheOptions(t *testing.T) {
	p := fullServer()
	md := (&resilientv1.Policy{}).ProtoReflect().Descriptor()
	seen := map[string]bool{}
	for _, s := range p.Settings() {
		key := s.Key
		if rest, ok := strings.CutPrefix(key, "methods.Get."); ok {
			if !strings.HasPrefix(rest, "server.") {
				t.Errorf("%s: a method's server-side value not under server", s.Key)
			}
			key = rest
		} else if !strings.HasPrefix(key, "shedding.") {
			t.Errorf("%s: neither shedding nor under the method's name", s.Key)
		}
		seen[key] = true
		if optionField(md, key) == nil {
			t.Errorf("%s: no such option in resilient.v1.Policy", s.Key)
		}
		if s.Value == "" || s.Value == "none" || s.Value == "0" || s.Value == "0s" {
			t.Errorf("%s = %q: a value set away from its zero is listed as it is", s.Key, s.Value)
		}
	}
	var walk func(md protoreflect.MessageDescriptor, prefix string)
	walk = func(md protoreflect.MessageDescriptor, prefix string) {
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			path := prefix + string(fd.Name())
			if sub := fd.Message(); sub != nil && sub.FullName() != "google.protobuf.Duration" {
				walk(sub, path+".")
				continue
			}
			if !seen[path] {
				t.Errorf("Server.Settings lists no %s", path)
			}
		}
	}
	for _, group := range []string{"shedding", "server"} {
		walk(md.Fields().ByName(protoreflect.Name(group)).Message(), group+".")
	}
	want := map[string]string{
		"shedding.low": "1", "shedding.critical": "4", "shedding.pushback": "3s", "shedding.code": "RESOURCE_EXHAUSTED",
		"methods.Get.server.min_deadline": "1ms", "methods.Get.server.default_timeout": "1s",
		"methods.Get.server.dedup.ttl": "1h0m0s", "methods.Get.server.dedup.lease": "1m0s",
		"methods.Get.server.dedup.on_store_error": "RunWithoutDedup",
	}
	got := map[string]string{}
	for _, s := range p.Settings() {
		got[s.Key] = s.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// optionField returns the field of md at the dotted path, or nil.
func optionField(md protoreflect.MessageDescriptor, path string) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	for _, name := range strings.Split(path, ".") {
		if md == nil {
			return nil
		}
		if fd = md.Fields().ByName(protoreflect.Name(name)); fd == nil {
			return nil
		}
		md = fd.Message()
	}
	return fd
}

// A server-side value whose zero means a default is listed as the default
// in force (the pushback, the code, the lease); a missing shedding or
// dedup, and a zero default_timeout, as "none"; what is set in Go only
// (the dedup's header, its final codes) and the priority are not listed.
func TestServerSettingsOfZeroValues(t *testing.T) {
	p := policy.Server{Name: "p.S", Methods: []policy.ServerMethod{{Name: "/p.S/Get"}}}
	check := func(p policy.Server, want map[string]string) {
		t.Helper()
		got := map[string]string{}
		for _, s := range p.Settings() {
			got[s.Key] = s.Value
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
	check(p, map[string]string{
		"shedding": "none", "methods.Get.server.min_deadline": "none",
		"methods.Get.server.default_timeout": "none", "methods.Get.server.dedup": "none",
	})
	p.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}}
	p.Methods[0].Dedup = &policy.Dedup{TTL: time.Hour}
	check(p, map[string]string{
		"shedding.low": "1", "shedding.normal": "1", "shedding.high": "1", "shedding.critical": "1",
		"shedding.pushback": "1s", "shedding.code": "UNAVAILABLE",
		"methods.Get.server.min_deadline": "none", "methods.Get.server.default_timeout": "none",
		"methods.Get.server.dedup.ttl": "1h0m0s", "methods.Get.server.dedup.lease": "10s",
		"methods.Get.server.dedup.on_store_error": "Refuse",
	})
}
