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

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// goMistake is a mistake of boundaries made in a Go policy: set writes it
// into a valid policy of the service t.Svc with the methods Get (unary)
// and Watch (server-streaming). goCore, when set, is the core the Go
// validator words it with instead of the options' (see its row).
type goMistake struct {
	set    func(s *policy.Service, get, watch *policy.Method)
	goCore string
}

func breaker() *policy.Breaker {
	return &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: 10 * time.Second, CoolDown: 5 * time.Second, HalfOpenProbes: 3, FailureCodes: policy.CodesOf(codes.Unavailable)}
}

func retry() *policy.Retry {
	return &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

func hedging() *policy.Hedging { return &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2} }

func cache() *policy.Cache {
	return &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1, KeyFields: []string{"id"}}
}

// The Go words a list of codes held as a set (a CodeSet has no order or
// index) by naming every answer at once, where the options name each at
// its index: same reason, in the plural.
const (
	answersRetryable = "holds [NOT_FOUND], answers of the service and not transient failures: repeating the call cannot change them; remove them"
	answersFailure   = "holds [INVALID_ARGUMENT], answers of the service and not failures of it: an answer shows the dependency is up, so it never opens the breaker; remove them"
	answersNonFatal  = "holds [PERMISSION_DENIED], answers of the service and not transient failures: repeating the call cannot change them; remove them"
)

var goMistakes = map[string]goMistake{
	"budget ratio above 1": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Budget = &policy.Budget{Ratio: 1.5, MinRetries: 10, Window: time.Second}
	}},
	"breaker ratio 0": {set: func(s *policy.Service, _, _ *policy.Method) { s.Breaker = breaker(); s.Breaker.FailureRatio = 0 }},
	"breaker ratio NaN": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Breaker = breaker()
		s.Breaker.FailureRatio = math.NaN()
	}},
	"cool-down negative": {set: func(s *policy.Service, _, _ *policy.Method) { s.Breaker = breaker(); s.Breaker.CoolDown = -time.Second }},
	"initial backoff negative": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.InitialBackoff = -time.Millisecond
	}},
	"bulkhead max wait negative": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Bulkhead = &policy.Bulkhead{Permits: 4, MaxWait: -time.Millisecond}
	}},
	"minimum calls 0":    {set: func(s *policy.Service, _, _ *policy.Method) { s.Breaker = breaker(); s.Breaker.MinimumCalls = 0 }},
	"bulkhead permits 0": {set: func(s *policy.Service, _, _ *policy.Method) { s.Bulkhead = &policy.Bulkhead{} }},
	"burst 0": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.RateLimit = &policy.RateLimit{RequestsPerSecond: 10}
	}},
	"cache max entries 0": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Timeout, get.Cache = true, time.Second, cache()
		get.Cache.MaxEntries = 0
	}},
	"max attempts 0": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.MaxAttempts = 0
	}},
	"multiplier below 1": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.Multiplier = 0.5
	}},
	"multiplier infinite": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.Multiplier = math.Inf(1)
	}},
	"probes 0":                  {set: func(s *policy.Service, _, _ *policy.Method) { s.Breaker = breaker(); s.Breaker.HalfOpenProbes = 0 }},
	"probes above the counters": {set: func(s *policy.Service, _, _ *policy.Method) { s.Breaker = breaker(); s.Breaker.HalfOpenProbes = 65536 }},
	"window calls above the ring": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Breaker = breaker()
		s.Breaker.WindowCalls = 2097153
	}},
	"rate negative": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.RateLimit = &policy.RateLimit{RequestsPerSecond: -1, Burst: 1}
	}},
	"max copies 1": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Hedging = true, hedging()
		get.Hedging.MaxCopies = 1
	}},
	"stale below fresh": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Timeout, get.Cache = true, time.Second, cache()
		get.Cache.FreshTTL, get.Cache.StaleTTL = 10*time.Second, 5*time.Second
	}},
	"max backoff below initial": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.MaxBackoff = 10 * time.Millisecond
	}},
	"timeout above overall": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Timeout, get.OverallTimeout = 2*time.Second, time.Second
	}},
	"hedging delay not below timeout": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Timeout, get.Hedging = true, 100*time.Millisecond, hedging()
		get.Hedging.Delay = 100 * time.Millisecond
	}},
	"hedging delay not below overall timeout": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.OverallTimeout, get.Hedging = true, 100*time.Millisecond, hedging()
		get.Hedging.Delay = 200 * time.Millisecond
	}},
	"adaptive min above the permits": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Bulkhead, s.AdaptiveLimit = &policy.Bulkhead{Permits: 4}, &policy.AdaptiveLimit{MinLimit: 5}
	}},
	// A zero Go field is its default: the Go counterpart of an option
	// written 0 is a negative value, refused by the same check.
	"adaptive min 0": {goCore: "must be at least 1, got -1", set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: -1}
	}},
	"adaptive max 0": {goCore: "must be at least 1, got -1", set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: -1}
	}},
	"adaptive max above the most": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: 1<<20 + 1}
	}},
	"adaptive initial 0": {goCore: "must be at least 1, got -1", set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: -1}
	}},
	"tolerance below 1": {set: func(s *policy.Service, _, _ *policy.Method) { s.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: 0.5} }},
	"tolerance NaN": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: math.NaN()}
	}},
	"tolerance infinite": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: math.Inf(1)}
	}},
	"smoothing above 1": {set: func(s *policy.Service, _, _ *policy.Method) { s.AdaptiveLimit = &policy.AdaptiveLimit{Smoothing: 1.5} }},
	"smoothing NaN": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{Smoothing: math.NaN()}
	}},
	"baseline window too short": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{BaselineWindow: 9}
	}},
	"adaptive without timeout": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{}
	}},
	"adaptive with timeout as long as overall_timeout": {set: func(s *policy.Service, get, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{}
		get.Timeout, get.OverallTimeout = 100*time.Millisecond, 100*time.Millisecond
	}},
	"a method's own adaptive limit with timeout as long as overall_timeout": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.AdaptiveLimit = &policy.AdaptiveLimit{}
		get.Timeout, get.OverallTimeout = time.Second, time.Second
	}},
	"adaptive min above max": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 5}
	}},
	"adaptive min above the default max": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 150}
	}},
	"method's own min above the default max": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 150}
	}},
	"adaptive initial above max": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 200}
	}},
	"adaptive initial below min": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 5, InitialLimit: 2}
	}},
	"adaptive initial above max under a bulkhead": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Bulkhead, s.AdaptiveLimit = &policy.Bulkhead{Permits: 8}, &policy.AdaptiveLimit{MaxLimit: 4, InitialLimit: 6}
	}},
	"throttle k below 1": {set: func(s *policy.Service, _, _ *policy.Method) { s.ClientThrottle = &policy.Throttle{K: 0.5} }},
	"throttle k NaN":     {set: func(s *policy.Service, _, _ *policy.Method) { s.ClientThrottle = &policy.Throttle{K: math.NaN()} }},
	"throttle window too short": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.ClientThrottle = &policy.Throttle{Window: 5}
	}},
	"max refusal 1": {set: func(s *policy.Service, _, _ *policy.Method) { s.ClientThrottle = &policy.Throttle{MaxRefusal: 1} }},
	"max refusal NaN": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.ClientThrottle = &policy.Throttle{MaxRefusal: math.NaN()}
	}},
	"retry without idempotency": {set: func(_ *policy.Service, get, _ *policy.Method) { get.Retry = retry() }},
	"retry of a stream":         {set: func(_ *policy.Service, _, watch *policy.Method) { watch.Idempotent, watch.Retry = true, retry() }},
	"hedging of a stream":       {set: func(_ *policy.Service, _, watch *policy.Method) { watch.Idempotent, watch.Hedging = true, hedging() }},
	"cache of a stream": {set: func(_ *policy.Service, _, watch *policy.Method) {
		watch.Idempotent, watch.Timeout, watch.Cache = true, time.Second, cache()
	}},
	"generated key on a stream":   {set: func(_ *policy.Service, _, watch *policy.Method) { watch.GenerateIdempotencyKey = true }},
	"hedging without idempotency": {set: func(_ *policy.Service, get, _ *policy.Method) { get.Hedging = hedging() }},
	"hedging and retries": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry, get.Hedging = true, retry(), hedging()
	}},
	"cache without idempotency": {set: func(_ *policy.Service, get, _ *policy.Method) { get.Timeout, get.Cache = time.Second, cache() }},
	"cache without timeout":     {set: func(_ *policy.Service, get, _ *policy.Method) { get.Idempotent, get.Cache = true, cache() }},
	"generated key beside a named one": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.IdempotencyKey, get.GenerateIdempotencyKey = "id", true
	}},
	"OK retryable": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.RetryableCodes = policy.CodesOf(codes.OK)
	}},
	"OK a failure": {set: func(s *policy.Service, _, _ *policy.Method) {
		s.Breaker = breaker()
		s.Breaker.FailureCodes = policy.CodesOf(codes.Unavailable, codes.OK)
	}},
	"OK non-fatal": {set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Hedging = true, hedging()
		get.Hedging.NonFatalCodes = policy.CodesOf(codes.OK)
	}},
	"answer retryable": {goCore: answersRetryable, set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Retry = true, retry()
		get.Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.NotFound)
	}},
	"answer a failure": {goCore: answersFailure, set: func(s *policy.Service, _, _ *policy.Method) {
		s.Breaker = breaker()
		s.Breaker.FailureCodes = policy.CodesOf(codes.InvalidArgument)
	}},
	"answer non-fatal": {goCore: answersNonFatal, set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Idempotent, get.Hedging = true, hedging()
		get.Hedging.NonFatalCodes = policy.CodesOf(codes.PermissionDenied)
	}},
}

// goProblems makes mistake m in a valid Go policy and returns what
// Problems finds, as "Method: key: message".
func goProblems(t *testing.T, m goMistake) []string {
	t.Helper()
	s := &policy.Service{Name: "t.Svc", Methods: []policy.Method{
		{Name: "/t.Svc/Get"},
		{Name: "/t.Svc/Watch", Kind: policy.KindServerStreaming},
	}}
	if pr := s.Problems(); len(pr) != 0 {
		t.Fatalf("the valid policy has problems: %+v", pr)
	}
	m.set(s, &s.Methods[0], &s.Methods[1])
	var out []string
	for _, pr := range s.Problems() {
		out = append(out, fmt.Sprintf("%s: %s: %s", pr.Method, pr.Key, pr.Message))
	}
	return out
}

// TestGoBoundaryRefusesTheSameMistakes: each mistake of boundaries, made
// in a Go policy, is refused by Problems (which Validate, NewClient and
// the override loader run) at the same option key and method, with the
// same core as the options checks' in a Go author's names (the
// boundary's goCore where the core names another value; for a list of
// codes, the mistake's goCore), after the Go name of the field it blames
// at most (Message speaks to a Go author: "StaleTTL 1ms is shorter than
// FreshTTL 1s").
func TestGoBoundaryRefusesTheSameMistakes(t *testing.T) {
	for _, b := range boundaries() {
		t.Run(b.name, func(t *testing.T) {
			m, ok := goMistakes[b.name]
			if !ok {
				t.Fatal("no Go counterpart: add it to goMistakes")
			}
			core := b.core
			if b.goCore != "" {
				core = b.goCore
			}
			if m.goCore != "" {
				core = m.goCore
			}
			key, _, _ := strings.Cut(b.path, "[")
			got := goProblems(t, m)
			head := b.method + ": " + key + ": "
			for _, l := range got {
				if rest, ok := strings.CutPrefix(l, head); ok {
					subject := contract.GoName(key[strings.LastIndexByte(key, '.')+1:]) + " "
					if strings.HasPrefix(rest, core) || strings.HasPrefix(rest, subject+core) {
						return
					}
				}
			}
			t.Errorf("Problems found:\n%s\nwant one at %q with the core %q", strings.Join(got, "\n"), head, core)
		})
	}
	if len(goMistakes) != len(boundaries()) {
		t.Errorf("%d Go mistakes for %d boundaries: a name does not match", len(goMistakes), len(boundaries()))
	}
}

// TestGoUnknownKindIsAStream: a Kind that is none of the four is refused
// a retry as the runtime treats it, a stream, not let through as unary
// because check has no words for it.
func TestGoUnknownKindIsAStream(t *testing.T) {
	got := goProblems(t, goMistake{set: func(_ *policy.Service, get, _ *policy.Method) {
		get.Kind, get.Idempotent, get.Retry = policy.Kind(9), true, retry()
	}})
	want := "Get: retry: streams are not retried, and Get is a streaming method: remove its retry"
	if len(got) != 1 || got[0] != want {
		t.Errorf("Problems found %q, want only %q", got, want)
	}
}
