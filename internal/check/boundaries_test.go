// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// options are the annotations of a test file: the service's and those of
// its methods Get (unary, request t.Req with a string field id) and Watch
// (server-streaming).
type options struct{ svc, get, watch *resilientv1.Policy }

// optionFindings runs the plugin's and lint's checks (rules.CheckFile) over
// a file annotated with o, and returns every finding as "Method: path:
// message" ("" for the service's).
func optionFindings(t *testing.T, o options) []string {
	t.Helper()
	method := func(name string, serverStreaming bool, p *resilientv1.Policy) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(".t.Req"), OutputType: proto.String(".t.Req")}
		if serverStreaming {
			m.ServerStreaming = proto.Bool(true)
		}
		if p != nil {
			m.Options = &descriptorpb.MethodOptions{}
			proto.SetExtension(m.Options, resilientv1.E_Method, p)
		}
		return m
	}
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String("Svc"),
		Method: []*descriptorpb.MethodDescriptorProto{method("Get", false, o.get), method("Watch", true, o.watch)}}
	if o.svc != nil {
		svc.Options = &descriptorpb.ServiceOptions{}
		proto.SetExtension(svc.Options, resilientv1.E_Service, o.svc)
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("t.proto"), Package: proto.String("t"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Req"), Field: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("id"), Number: proto.Int32(1), JsonName: proto.String("id"),
			Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}}}},
		Service: []*descriptorpb.ServiceDescriptorProto{svc},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	rules.CheckFile(fd, func(d protoreflect.Descriptor, f rules.Finding) {
		if f.Rule == rules.RuleNoTimeout {
			return // lint only, and off by default
		}
		m := ""
		if _, ok := d.(protoreflect.MethodDescriptor); ok {
			m = string(d.Name())
		}
		out = append(out, fmt.Sprintf("%s: %s: %s", m, f.Path, f.Message))
	})
	return out
}

var (
	sec        = durationpb.New
	u32        = proto.Uint32
	idempotent = proto.Bool(true)
)

// boundary is one mistake, refused by both boundaries with the same core.
type boundary struct {
	name string
	// core is the message's core, as check words it to an options
	// author; leaf is check's answer for the mistake, fine its answer for
	// a value next to it that is right (""). goCore and goLeaf are the
	// same to a Go author, for a check whose core names another value
	// (check.Words: "than {FreshTTL} 10s"); "" for one that names none,
	// which both read alike.
	core, leaf, fine string
	goCore, goLeaf   string
	// opts is the mistake as annotations; method and path say where
	// rules reports it ("" for the service).
	opts         options
	method, path string
}

func boundaries() []boundary {
	get := func(p *resilientv1.Policy) options { return options{get: p} }
	svc := func(p *resilientv1.Policy) options { return options{svc: p} }
	watch := func(p *resilientv1.Policy) options { return options{watch: p} }
	retry := func() *resilientv1.Retry { return &resilientv1.Retry{} }
	// adaptive is a service's adaptive limit a, beside the timeout its
	// methods need.
	adaptive := func(a *resilientv1.AdaptiveLimit) options {
		return svc(&resilientv1.Policy{Timeout: sec(time.Second), AdaptiveLimit: a})
	}
	return []boundary{
		{name: "budget ratio above 1", core: "must be in (0, 1], got 1.5", leaf: check.Ratio(1.5), fine: check.Ratio(1),
			opts: svc(&resilientv1.Policy{RetryBudget: &resilientv1.RetryBudget{Ratio: proto.Float64(1.5)}}), path: "retry_budget.ratio"},
		{name: "breaker ratio 0", core: "must be in (0, 1], got 0", leaf: check.Ratio(0), fine: check.Ratio(0.01),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{FailureRatio: proto.Float64(0)}}), path: "circuit_breaker.failure_ratio"},
		{name: "breaker ratio NaN", core: "must be in (0, 1], got NaN", leaf: check.Ratio(math.NaN()), fine: check.Ratio(0.5),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{FailureRatio: proto.Float64(math.NaN())}}), path: "circuit_breaker.failure_ratio"},
		{name: "cool-down negative", core: "must be positive, got -1s", leaf: check.Positive(-time.Second), fine: check.Positive(time.Nanosecond),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{CoolDown: sec(-time.Second)}}), path: "circuit_breaker.cool_down"},
		{name: "initial backoff negative", core: "must be positive, got -1ms", leaf: check.Positive(-time.Millisecond), fine: check.Positive(time.Millisecond),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{InitialBackoff: sec(-time.Millisecond)}}), method: "Get", path: "retry.initial_backoff"},
		{name: "bulkhead max wait negative", core: "must not be negative, got -1ms", leaf: check.NotNegative(-time.Millisecond), fine: check.NotNegative(0),
			opts: svc(&resilientv1.Policy{Bulkhead: &resilientv1.Bulkhead{Permits: u32(4), MaxWait: sec(-time.Millisecond)}}), path: "bulkhead.max_wait"},
		{name: "minimum calls 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{MinimumCalls: u32(0)}}), path: "circuit_breaker.minimum_calls"},
		{name: "bulkhead permits 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: svc(&resilientv1.Policy{Bulkhead: &resilientv1.Bulkhead{Permits: u32(0)}}), path: "bulkhead.permits"},
		{name: "burst 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: svc(&resilientv1.Policy{RateLimit: &resilientv1.RateLimit{RequestsPerSecond: proto.Float64(10), Burst: u32(0)}}), path: "rate_limit.burst"},
		{name: "cache max entries 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Timeout: sec(time.Second),
				Cache: &resilientv1.Cache{FreshTtl: sec(time.Second), KeyFields: []string{"id"}, MaxEntries: u32(0)}}), method: "Get", path: "cache.max_entries"},
		{name: "max attempts 0", core: "must be at least 1, got 0 (it counts the first attempt, and 1 means no retry)", leaf: check.MaxAttempts(0), fine: check.MaxAttempts(1),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{MaxAttempts: u32(0)}}), method: "Get", path: "retry.max_attempts"},
		{name: "multiplier below 1", core: "must be a finite number of at least 1, got 0.5", leaf: check.Multiplier(0.5), fine: check.Multiplier(1),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{BackoffMultiplier: proto.Float64(0.5)}}), method: "Get", path: "retry.backoff_multiplier"},
		{name: "multiplier infinite", core: "must be a finite number of at least 1, got +Inf", leaf: check.Multiplier(math.Inf(1)), fine: check.Multiplier(1e300),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{BackoffMultiplier: proto.Float64(math.Inf(1))}}), method: "Get", path: "retry.backoff_multiplier"},
		{name: "probes 0", core: "must be at least 1, got 0", leaf: check.Probes(0), fine: check.Probes(1),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{HalfOpenProbes: u32(0)}}), path: "circuit_breaker.half_open_probes"},
		{name: "probes above the counters", core: "must be at most 65535, got 65536: a handful of probes tells whether the dependency is back", leaf: check.Probes(65536), fine: check.Probes(65535),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{HalfOpenProbes: u32(65536)}}), path: "circuit_breaker.half_open_probes"},
		{name: "window calls above the ring", core: "must be in [1, 2097152], got 2097153", leaf: check.WindowCalls(2097153), fine: check.WindowCalls(2097152),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{WindowCalls: u32(2097153)}}), path: "circuit_breaker.window_calls"},
		{name: "rate negative", core: "must be a positive, finite number, got -1; it is the sustained rate of calls allowed", leaf: check.Rate(-1), fine: check.Rate(0.001),
			opts: svc(&resilientv1.Policy{RateLimit: &resilientv1.RateLimit{RequestsPerSecond: proto.Float64(-1)}}), path: "rate_limit.requests_per_second"},
		{name: "max copies 1", core: "must be at least 2, got 1 (it counts the first copy, and 1 would mean no hedging)", leaf: check.MaxCopies(1), fine: check.MaxCopies(2),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond), MaxCopies: u32(1)}}), method: "Get", path: "hedging.max_copies"},

		{name: "stale below fresh", core: "5s is shorter than fresh_ttl 10s: an answer is stale only after it stopped being fresh",
			goCore: "5s is shorter than FreshTTL 10s: an answer is stale only after it stopped being fresh",
			leaf:   check.StaleTTL(10*time.Second, 5*time.Second).Options(), goLeaf: check.StaleTTL(10*time.Second, 5*time.Second).Go(), fine: check.StaleTTL(10*time.Second, 10*time.Second).Options(),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Timeout: sec(time.Second),
				Cache: &resilientv1.Cache{FreshTtl: sec(10 * time.Second), StaleTtl: sec(5 * time.Second), KeyFields: []string{"id"}}}), method: "Get", path: "cache.stale_ttl"},
		{name: "max backoff below initial", core: "10ms is shorter than initial_backoff 50ms: raise max_backoff or lower initial_backoff",
			goCore: "10ms is shorter than InitialBackoff 50ms: raise MaxBackoff or lower InitialBackoff",
			leaf:   check.MaxBackoff(50*time.Millisecond, 10*time.Millisecond, "").Options(), goLeaf: check.MaxBackoff(50*time.Millisecond, 10*time.Millisecond, "").Go(), fine: check.MaxBackoff(50*time.Millisecond, 50*time.Millisecond, "").Options(),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{InitialBackoff: sec(50 * time.Millisecond), MaxBackoff: sec(10 * time.Millisecond)}}), method: "Get", path: "retry.max_backoff"},
		{name: "timeout above overall", core: "2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call",
			goCore: "2s is longer than OverallTimeout 1s: one attempt cannot outlast the whole call",
			leaf:   check.Timeout(2*time.Second, time.Second, "").Options(), goLeaf: check.Timeout(2*time.Second, time.Second, "").Go(), fine: check.Timeout(time.Second, time.Second, "").Options(),
			opts: get(&resilientv1.Policy{Timeout: sec(2 * time.Second), OverallTimeout: sec(time.Second)}), method: "Get", path: "timeout"},
		{name: "hedging delay not below timeout", core: "100ms is not shorter than timeout 100ms: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout",
			goCore: "100ms is not shorter than Timeout 100ms: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen Timeout",
			leaf:   check.HedgingDelay(100*time.Millisecond, 100*time.Millisecond, 0, "", "").Options(), goLeaf: check.HedgingDelay(100*time.Millisecond, 100*time.Millisecond, 0, "", "").Go(), fine: check.HedgingDelay(99*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, "", "").Options(),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Timeout: sec(100 * time.Millisecond), Hedging: &resilientv1.Hedging{Delay: sec(100 * time.Millisecond)}}), method: "Get", path: "hedging.delay"},
		{name: "hedging delay not below overall timeout", core: "200ms is not shorter than overall_timeout 100ms: no copy could be sent before the call ends; shorten the delay (about the p95)",
			goCore: "200ms is not shorter than OverallTimeout 100ms: no copy could be sent before the call ends; shorten the delay (about the p95)",
			leaf:   check.HedgingDelay(200*time.Millisecond, 0, 100*time.Millisecond, "", "").Options(), goLeaf: check.HedgingDelay(200*time.Millisecond, 0, 100*time.Millisecond, "", "").Go(), fine: check.HedgingDelay(200*time.Millisecond, 0, 0, "", "").Options(),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, OverallTimeout: sec(100 * time.Millisecond), Hedging: &resilientv1.Hedging{Delay: sec(200 * time.Millisecond)}}), method: "Get", path: "hedging.delay"},
		{name: "adaptive min above the permits", core: "5 is above the bulkhead's 4 permits, the limit's ceiling: lower it to at most 4",
			leaf: check.AboveCeiling(5, 4, ""), fine: check.AboveCeiling(4, 4, ""),
			opts: svc(&resilientv1.Policy{Bulkhead: &resilientv1.Bulkhead{Permits: u32(4)}, AdaptiveLimit: &resilientv1.AdaptiveLimit{MinLimit: u32(5)}}), path: "adaptive_limit.min_limit"},
		{name: "adaptive min 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: adaptive(&resilientv1.AdaptiveLimit{MinLimit: u32(0)}), path: "adaptive_limit.min_limit"},
		{name: "adaptive max 0", core: "must be at least 1, got 0", leaf: check.AdaptiveMaxLimit(0), fine: check.AdaptiveMaxLimit(1),
			opts: adaptive(&resilientv1.AdaptiveLimit{MaxLimit: u32(0)}), path: "adaptive_limit.max_limit"},
		{name: "adaptive max above the most", core: "must be at most 1048576, got 1048577", leaf: check.AdaptiveMaxLimit(1<<20 + 1), fine: check.AdaptiveMaxLimit(1 << 20),
			opts: adaptive(&resilientv1.AdaptiveLimit{MaxLimit: u32(1<<20 + 1)}), path: "adaptive_limit.max_limit"},
		{name: "adaptive initial 0", core: "must be at least 1, got 0", leaf: check.AtLeastOne(0), fine: check.AtLeastOne(1),
			opts: adaptive(&resilientv1.AdaptiveLimit{InitialLimit: u32(0)}), path: "adaptive_limit.initial_limit"},
		{name: "tolerance below 1", core: "must be a finite number of at least 1, got 0.5: below 1 the limit would shrink while the dependency is as fast as ever",
			leaf: check.Tolerance(0.5), fine: check.Tolerance(1),
			opts: adaptive(&resilientv1.AdaptiveLimit{Tolerance: proto.Float64(0.5)}), path: "adaptive_limit.tolerance"},
		{name: "tolerance NaN", core: "must be a finite number of at least 1, got NaN: below 1 the limit would shrink while the dependency is as fast as ever",
			leaf: check.Tolerance(math.NaN()), fine: check.Tolerance(1e300),
			opts: adaptive(&resilientv1.AdaptiveLimit{Tolerance: proto.Float64(math.NaN())}), path: "adaptive_limit.tolerance"},
		{name: "tolerance infinite", core: "must be a finite number of at least 1, got +Inf: below 1 the limit would shrink while the dependency is as fast as ever",
			leaf: check.Tolerance(math.Inf(1)), fine: check.Tolerance(1.5),
			opts: adaptive(&resilientv1.AdaptiveLimit{Tolerance: proto.Float64(math.Inf(1))}), path: "adaptive_limit.tolerance"},
		{name: "smoothing above 1", core: "must be in (0, 1], got 1.5", leaf: check.Ratio(1.5), fine: check.Ratio(1),
			opts: adaptive(&resilientv1.AdaptiveLimit{Smoothing: proto.Float64(1.5)}), path: "adaptive_limit.smoothing"},
		{name: "smoothing NaN", core: "must be in (0, 1], got NaN", leaf: check.Ratio(math.NaN()), fine: check.Ratio(0.1),
			opts: adaptive(&resilientv1.AdaptiveLimit{Smoothing: proto.Float64(math.NaN())}), path: "adaptive_limit.smoothing"},
		{name: "baseline window too short", core: "must be at least 10ns, got 9ns: the window is ten buckets of at least a nanosecond each",
			leaf: check.AdaptiveWindow(9), fine: check.AdaptiveWindow(10),
			opts: adaptive(&resilientv1.AdaptiveLimit{BaselineWindow: sec(9)}), path: "adaptive_limit.baseline_window"},
		{name: "adaptive min above max", core: "10 is above max_limit 5: lower min_limit or raise max_limit",
			goCore: "10 is above MaxLimit 5: lower MinLimit or raise MaxLimit",
			leaf:   check.MinAboveMax(10, 5, "").Options(), goLeaf: check.MinAboveMax(10, 5, "").Go(), fine: check.MinAboveMax(5, 5, "").Options(),
			opts: adaptive(&resilientv1.AdaptiveLimit{MinLimit: u32(10), MaxLimit: u32(5)}), path: "adaptive_limit.min_limit"},
		{name: "adaptive min above the default max", core: "150 is above max_limit 100 (the default): lower min_limit or raise max_limit",
			goCore: "150 is above MaxLimit 100 (the default): lower MinLimit or raise MaxLimit",
			leaf:   check.MinAboveMax(150, 100, " (the default)").Options(), goLeaf: check.MinAboveMax(150, 100, " (the default)").Go(), fine: check.MinAboveMax(100, 100, " (the default)").Options(),
			opts: adaptive(&resilientv1.AdaptiveLimit{MinLimit: u32(150)}), path: "adaptive_limit.min_limit"},
		{name: "adaptive without timeout", core: "Get has no timeout: the limit halves when an attempt times out, and without a per-attempt timeout a dependency that hangs never makes it fall",
			goCore: "Get has no Timeout: the limit halves when an attempt times out, and without a per-attempt timeout a dependency that hangs never makes it fall",
			leaf:   check.AdaptiveTimeout("Get", 0).Options(), goLeaf: check.AdaptiveTimeout("Get", 0).Go(), fine: check.AdaptiveTimeout("Get", time.Nanosecond).Options(),
			opts: svc(&resilientv1.Policy{AdaptiveLimit: &resilientv1.AdaptiveLimit{}}), method: "Get", path: "adaptive_limit"},
		{name: "adaptive with timeout as long as overall_timeout", core: "Get's timeout 100ms is as long as its overall_timeout 100ms: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall",
			goCore: "Get's Timeout 100ms is as long as its OverallTimeout 100ms: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall",
			leaf:   check.AdaptiveOverall("Get", 100*time.Millisecond, 100*time.Millisecond).Options(), goLeaf: check.AdaptiveOverall("Get", 100*time.Millisecond, 100*time.Millisecond).Go(), fine: check.AdaptiveOverall("Get", 100*time.Millisecond, 100*time.Millisecond+1).Options(),
			opts: options{svc: &resilientv1.Policy{Timeout: sec(100 * time.Millisecond), AdaptiveLimit: &resilientv1.AdaptiveLimit{}}, get: &resilientv1.Policy{OverallTimeout: sec(100 * time.Millisecond)}}, method: "Get", path: "adaptive_limit"},
		{name: "a method's own adaptive limit with timeout as long as overall_timeout", core: "Get's timeout 1s is as long as its overall_timeout 1s: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall",
			goCore: "Get's Timeout 1s is as long as its OverallTimeout 1s: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall",
			leaf:   check.AdaptiveOverall("Get", time.Second, time.Second).Options(), goLeaf: check.AdaptiveOverall("Get", time.Second, time.Second).Go(), fine: check.AdaptiveOverall("Get", time.Second, 0).Options(),
			opts:   get(&resilientv1.Policy{Timeout: sec(time.Second), OverallTimeout: sec(time.Second), AdaptiveLimit: &resilientv1.AdaptiveLimit{PerMethod: proto.Bool(true)}}),
			method: "Get", path: "adaptive_limit"},
		{name: "method's own min above the default max", core: "150 is above max_limit 100 (the default): lower min_limit or raise max_limit",
			goCore: "150 is above MaxLimit 100 (the default): lower MinLimit or raise MaxLimit",
			leaf:   check.MinAboveMax(150, 100, " (the default)").Options(), goLeaf: check.MinAboveMax(150, 100, " (the default)").Go(), fine: check.MinAboveMax(1, 100, " (the default)").Options(),
			opts:   get(&resilientv1.Policy{Timeout: sec(time.Second), AdaptiveLimit: &resilientv1.AdaptiveLimit{PerMethod: proto.Bool(true), MinLimit: u32(150)}}),
			method: "Get", path: "adaptive_limit.min_limit"},
		{name: "adaptive initial above max", core: "200 is not between min_limit 1 and max_limit 100: set it within them",
			goCore: "200 is not between MinLimit 1 and MaxLimit 100: set it within them",
			leaf:   check.InitialOutside(200, 1, 100).Options(), goLeaf: check.InitialOutside(200, 1, 100).Go(), fine: check.InitialOutside(100, 1, 100).Options(),
			opts: adaptive(&resilientv1.AdaptiveLimit{InitialLimit: u32(200)}), path: "adaptive_limit.initial_limit"},
		{name: "adaptive initial below min", core: "2 is not between min_limit 5 and max_limit 100: set it within them",
			goCore: "2 is not between MinLimit 5 and MaxLimit 100: set it within them",
			leaf:   check.InitialOutside(2, 5, 100).Options(), goLeaf: check.InitialOutside(2, 5, 100).Go(), fine: check.InitialOutside(5, 5, 100).Options(),
			opts: adaptive(&resilientv1.AdaptiveLimit{MinLimit: u32(5), InitialLimit: u32(2)}), path: "adaptive_limit.initial_limit"},
		{name: "adaptive initial above max under a bulkhead", core: "6 is not between min_limit 1 and max_limit 4: set it within them",
			goCore: "6 is not between MinLimit 1 and MaxLimit 4: set it within them",
			leaf:   check.InitialOutside(6, 1, 4).Options(), goLeaf: check.InitialOutside(6, 1, 4).Go(), fine: check.InitialOutside(4, 1, 4).Options(),
			opts: svc(&resilientv1.Policy{Timeout: sec(time.Second), Bulkhead: &resilientv1.Bulkhead{Permits: u32(8)},
				AdaptiveLimit: &resilientv1.AdaptiveLimit{MaxLimit: u32(4), InitialLimit: u32(6)}}), path: "adaptive_limit.initial_limit"},
		{name: "throttle k below 1", core: "must be a finite number of at least 1, got 0.5: with less the throttler refuses requests the dependency accepts",
			leaf: check.ThrottleK(0.5), fine: check.ThrottleK(1),
			opts: svc(&resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{K: proto.Float64(0.5)}}), path: "client_throttle.k"},
		{name: "throttle k NaN", core: "must be a finite number of at least 1, got NaN: with less the throttler refuses requests the dependency accepts",
			leaf: check.ThrottleK(math.NaN()), fine: check.ThrottleK(2),
			opts: svc(&resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{K: proto.Float64(math.NaN())}}), path: "client_throttle.k"},
		{name: "throttle window too short", core: "must be at least 10ns, got 5ns: the window is ten buckets of at least a nanosecond each",
			leaf: check.AdaptiveWindow(5), fine: check.AdaptiveWindow(time.Second),
			opts: svc(&resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{Window: sec(5)}}), path: "client_throttle.window"},
		{name: "max refusal 1", core: "must be in (0, 1), got 1: some attempts must always reach the dependency to see it recover",
			leaf: check.MaxRefusal(1), fine: check.MaxRefusal(0.99),
			opts: svc(&resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{MaxRefusal: proto.Float64(1)}}), path: "client_throttle.max_refusal"},
		{name: "max refusal NaN", core: "must be in (0, 1), got NaN: some attempts must always reach the dependency to see it recover",
			leaf: check.MaxRefusal(math.NaN()), fine: check.MaxRefusal(0.01),
			opts: svc(&resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{MaxRefusal: proto.Float64(math.NaN())}}), path: "client_throttle.max_refusal"},

		{name: "retry without idempotency", core: "Get is not idempotent and has no idempotency_key, so a retry could apply it twice",
			goCore: "Get is not idempotent and has no IdempotencyKey, so a retry could apply it twice",
			leaf:   check.RetrySafe("Get", false, false).Options(), goLeaf: check.RetrySafe("Get", false, false).Go(), fine: check.RetrySafe("Get", false, true).Options(),
			opts: get(&resilientv1.Policy{Retry: retry()}), method: "Get", path: "retry"},
		{name: "retry of a stream", core: "streams are not retried, and Watch is a server-streaming method",
			leaf: check.StreamRetry("Watch", check.Kind(false, true)), fine: check.StreamRetry("Get", check.Kind(false, false)),
			opts: watch(&resilientv1.Policy{Idempotent: idempotent, Retry: retry()}), method: "Watch", path: "retry"},
		{name: "hedging of a stream", core: "streams are not hedged, and Watch is a server-streaming method",
			leaf: check.StreamHedging("Watch", check.Kind(false, true)), fine: check.StreamHedging("Get", ""),
			opts: watch(&resilientv1.Policy{Idempotent: idempotent, Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond)}}), method: "Watch", path: "hedging"},
		{name: "cache of a stream", core: "streams are not cached, and Watch is a server-streaming method",
			leaf: check.StreamCache("Watch", check.Kind(false, true)), fine: check.StreamCache("Get", ""),
			opts: watch(&resilientv1.Policy{Idempotent: idempotent, Timeout: sec(time.Second), Cache: &resilientv1.Cache{FreshTtl: sec(time.Second), KeyFields: []string{"id"}}}), method: "Watch", path: "cache"},
		{name: "generated key on a stream", core: "only unary calls send an idempotency key, and Watch is a server-streaming method",
			leaf: check.StreamKey("Watch", check.Kind(false, true)), fine: check.StreamKey("Get", ""),
			opts: watch(&resilientv1.Policy{GenerateIdempotencyKey: proto.Bool(true)}), method: "Watch", path: "generate_idempotency_key"},
		{name: "hedging without idempotency", core: "Get is not idempotent, and hedged copies run at the same time, so each could apply it",
			leaf: check.HedgingIdempotent("Get", false), fine: check.HedgingIdempotent("Get", true),
			opts: get(&resilientv1.Policy{Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond)}}), method: "Get", path: "hedging"},
		{name: "hedging and retries", core: "Get also retries: a method hedges or retries, not both, since hedged copies already repeat the call",
			leaf: check.HedgingRetries("Get", true, ""), fine: check.HedgingRetries("Get", false, ""),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: retry(), Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond)}}), method: "Get", path: "hedging"},
		{name: "cache without idempotency", core: "Get is not idempotent: only reads are cached, since a cached answer means the call is not made",
			leaf: check.CacheIdempotent("Get", false), fine: check.CacheIdempotent("Get", true),
			opts: get(&resilientv1.Policy{Timeout: sec(time.Second), Cache: &resilientv1.Cache{FreshTtl: sec(time.Second), KeyFields: []string{"id"}}}), method: "Get", path: "cache"},
		{name: "cache without timeout", core: "Get has neither timeout nor overall_timeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set timeout or overall_timeout",
			goCore: "Get has neither Timeout nor OverallTimeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set Timeout or OverallTimeout",
			leaf:   check.CacheTimeout("Get", 0, 0).Options(), goLeaf: check.CacheTimeout("Get", 0, 0).Go(), fine: check.CacheTimeout("Get", 0, time.Second).Options(),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Cache: &resilientv1.Cache{FreshTtl: sec(time.Second), KeyFields: []string{"id"}}}), method: "Get", path: "cache"},
		{name: "generated key beside a named one", core: `the method already sends its field "id" as the idempotency key`,
			leaf: check.KeyTwice("id", true), fine: check.KeyTwice("", true),
			opts: get(&resilientv1.Policy{IdempotencyKey: proto.String("id"), GenerateIdempotencyKey: proto.Bool(true)}), method: "Get", path: "generate_idempotency_key"},

		{name: "OK retryable", core: `"OK" is a success, there is nothing to retry: remove it`,
			leaf: check.Code(check.Retryable, codes.OK), fine: check.Code(check.Retryable, codes.Unavailable),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{RetryableCodes: []string{"OK"}}}), method: "Get", path: "retry.retryable_codes[0]"},
		{name: "OK a failure", core: `"OK" is a success and cannot count as a failure: remove it`,
			leaf: check.Code(check.Failure, codes.OK), fine: check.Code(check.Failure, codes.Internal),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{FailureCodes: []string{"UNAVAILABLE", "OK"}}}), path: "circuit_breaker.failure_codes[1]"},
		{name: "OK non-fatal", core: `"OK" is a success, there is nothing to hedge: remove it`,
			leaf: check.Code(check.NonFatal, codes.OK), fine: check.Code(check.NonFatal, codes.Unavailable),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond), NonFatalCodes: []string{"OK"}}}), method: "Get", path: "hedging.non_fatal_codes[0]"},

		{name: "answer retryable", core: `"NOT_FOUND" is an answer of the service, not a transient failure: repeating the call cannot change it; remove it`,
			leaf: check.Code(check.Retryable, codes.NotFound), fine: check.Code(check.Retryable, codes.Aborted),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Retry: &resilientv1.Retry{RetryableCodes: []string{"UNAVAILABLE", "NOT_FOUND"}}}), method: "Get", path: "retry.retryable_codes[1]"},
		{name: "answer a failure", core: `"INVALID_ARGUMENT" is an answer of the service, not a failure of it: an answer shows the dependency is up, so it never opens the breaker; remove it`,
			leaf: check.Code(check.Failure, codes.InvalidArgument), fine: check.Code(check.Failure, codes.DeadlineExceeded),
			opts: svc(&resilientv1.Policy{CircuitBreaker: &resilientv1.CircuitBreaker{FailureCodes: []string{"INVALID_ARGUMENT"}}}), path: "circuit_breaker.failure_codes[0]"},
		{name: "answer non-fatal", core: `"PERMISSION_DENIED" is an answer of the service, not a transient failure: repeating the call cannot change it; remove it`,
			leaf: check.Code(check.NonFatal, codes.PermissionDenied), fine: check.Code(check.NonFatal, codes.ResourceExhausted),
			opts: get(&resilientv1.Policy{Idempotent: idempotent, Hedging: &resilientv1.Hedging{Delay: sec(time.Millisecond), NonFatalCodes: []string{"PERMISSION_DENIED"}}}), method: "Get", path: "hedging.non_fatal_codes[0]"},
	}
}

// TestBoundariesShareTheCore: each mistake of boundaries is refused by the
// checks of the options (rules.CheckFile, which the plugin, lint and the
// override loader run) at its path, with check's core in the message; and
// check words it as the table does, and accepts a value next to it.
func TestBoundariesShareTheCore(t *testing.T) {
	for _, b := range boundaries() {
		t.Run(b.name, func(t *testing.T) {
			if b.leaf != b.core {
				t.Errorf("check says %q, want %q", b.leaf, b.core)
			}
			if b.goLeaf != b.goCore {
				t.Errorf("check says %q to a Go author, want %q", b.goLeaf, b.goCore)
			}
			if b.fine != "" {
				t.Errorf("check refuses the value next to it: %q", b.fine)
			}
			got := optionFindings(t, b.opts)
			want := b.method + ": " + b.path + ": " + b.core
			if !hasPrefix(got, want) {
				t.Errorf("options checks found:\n%s\nwant one starting %q", strings.Join(got, "\n"), want)
			}
		})
	}
}

func hasPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
