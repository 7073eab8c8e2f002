// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// withService is a valid policy of a service with a unary method Get
// (idempotent, timeouts set) and a server-streaming one Watch; each case
// of TestProblemsNameTheValuesTheyRelate makes one mistake in it.
func withService() *policy.Service {
	return &policy.Service{Name: "p.S", Methods: []policy.Method{
		{Name: "/p.S/Get", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second, OverallTimeout: 3 * time.Second},
		{Name: "/p.S/Watch", Kind: policy.KindServerStreaming, Idempotent: true},
	}}
}

func withRetry() *policy.Retry {
	return &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

func withBreaker() *policy.Breaker {
	return &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: 10 * time.Second, CoolDown: 5 * time.Second, HalfOpenProbes: 3, FailureCodes: policy.CodesOf(codes.Unavailable)}
}

// TestProblemsNameTheValuesTheyRelate: every check of two or more values
// names, in Problem.With, the option keys of the others (the override
// loader blames an override of any of them by it), and a check of the
// value against the kind of its method, which no option sets, names none.
// Each case makes one mistake and expects the problem at its key with
// exactly those keys; every key of every problem must be a path of the
// options, and every pair problem of a unary method must name one.
func TestProblemsNameTheValuesTheyRelate(t *testing.T) {
	get := func(p *policy.Service) *policy.Method { return &p.Methods[0] }
	watch := func(p *policy.Service) *policy.Method { return &p.Methods[1] }
	for _, tc := range []struct {
		name   string
		edit   func(p *policy.Service)
		method string // of the problem, "" for the service
		key    string
		with   []string // nil: none (the method's kind)
	}{
		{"timeout above overall_timeout", func(p *policy.Service) { get(p).Timeout = 5 * time.Second }, "Get", "timeout", []string{"overall_timeout"}},
		{"max_backoff below initial_backoff", func(p *policy.Service) {
			get(p).Retry = withRetry()
			get(p).Retry.MaxBackoff = time.Millisecond
		}, "Get", "retry.max_backoff", []string{"retry.initial_backoff"}},
		{"retries on a method not idempotent", func(p *policy.Service) {
			get(p).Retry, get(p).Idempotent = withRetry(), false
		}, "Get", "retry", []string{"idempotent", "idempotency_key", "generate_idempotency_key"}},
		{"retries on a stream", func(p *policy.Service) { watch(p).Retry = withRetry() }, "Watch", "retry", nil},
		{"adaptive limit without timeout", func(p *policy.Service) {
			p.AdaptiveLimit, get(p).Timeout = &policy.AdaptiveLimit{}, 0
		}, "Get", "adaptive_limit", []string{"timeout"}},
		{"adaptive limit with timeout as long as overall_timeout", func(p *policy.Service) {
			p.AdaptiveLimit, get(p).Timeout, get(p).OverallTimeout = &policy.AdaptiveLimit{}, time.Second, time.Second
		}, "Get", "adaptive_limit", []string{"timeout", "overall_timeout"}},
		{"generated key on a stream", func(p *policy.Service) { watch(p).GenerateIdempotencyKey = true }, "Watch", "generate_idempotency_key", nil},
		{"hedging a method not idempotent", func(p *policy.Service) {
			get(p).Hedging, get(p).Idempotent = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2}, false
		}, "Get", "hedging", []string{"idempotent"}},
		{"hedging a stream", func(p *policy.Service) { watch(p).Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2} }, "Watch", "hedging", nil},
		{"hedging a method that retries", func(p *policy.Service) {
			get(p).Hedging, get(p).Retry = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2}, withRetry()
		}, "Get", "hedging", []string{"retry"}},
		{"hedging delay past the timeout", func(p *policy.Service) { get(p).Hedging = &policy.Hedging{Delay: 2 * time.Second, MaxCopies: 2} }, "Get", "hedging.delay", []string{"timeout", "overall_timeout"}},
		{"rate limit on a stream", func(p *policy.Service) { watch(p).RateLimit = &policy.RateLimit{RequestsPerSecond: 1, Burst: 1} }, "Watch", "rate_limit", nil},
		{"cache of a method not idempotent", func(p *policy.Service) {
			get(p).Cache, get(p).Idempotent = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1}, false
		}, "Get", "cache", []string{"idempotent"}},
		{"cache of a stream", func(p *policy.Service) {
			watch(p).Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1}
		}, "Watch", "cache", nil},
		{"cache without timeouts", func(p *policy.Service) {
			get(p).Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1}
			get(p).Timeout, get(p).OverallTimeout = 0, 0
		}, "Get", "cache", []string{"timeout", "overall_timeout"}},
		{"stale_ttl below fresh_ttl", func(p *policy.Service) {
			get(p).Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Millisecond, MaxEntries: 1}
		}, "Get", "cache.stale_ttl", []string{"cache.fresh_ttl"}},
		{"service breaker: minimum_calls above window_calls", func(p *policy.Service) {
			p.Breaker = withBreaker()
			p.Breaker.WindowCalls = 10
		}, "", "circuit_breaker.minimum_calls", []string{"circuit_breaker.window_calls"}},
		{"method breaker: minimum_calls above window_calls", func(p *policy.Service) {
			get(p).Breaker = withBreaker()
			get(p).Breaker.WindowCalls = 10
		}, "Get", "circuit_breaker.minimum_calls", []string{"circuit_breaker.window_calls"}},
		{"min_limit above the permits", func(p *policy.Service) {
			p.Bulkhead, p.AdaptiveLimit = &policy.Bulkhead{Permits: 8}, &policy.AdaptiveLimit{MinLimit: 9}
		}, "", "adaptive_limit.min_limit", []string{"bulkhead.permits"}},
		{"max_limit above the permits", func(p *policy.Service) {
			p.Bulkhead, p.AdaptiveLimit = &policy.Bulkhead{Permits: 8}, &policy.AdaptiveLimit{MaxLimit: 9}
		}, "", "adaptive_limit.max_limit", []string{"bulkhead.permits"}},
		{"initial_limit above the permits", func(p *policy.Service) {
			p.Bulkhead, p.AdaptiveLimit = &policy.Bulkhead{Permits: 8}, &policy.AdaptiveLimit{InitialLimit: 9}
		}, "", "adaptive_limit.initial_limit", []string{"bulkhead.permits"}},
		{"a method's own limit above the service's permits", func(p *policy.Service) {
			p.Bulkhead, get(p).AdaptiveLimit = &policy.Bulkhead{Permits: 8}, &policy.AdaptiveLimit{MaxLimit: 9}
		}, "Get", "adaptive_limit.max_limit", []string{"bulkhead.permits"}},
		{"min_limit above max_limit", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 5} }, "", "adaptive_limit.min_limit", []string{"adaptive_limit.max_limit"}},
		{"min_limit above the default max_limit", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 150} }, "", "adaptive_limit.min_limit", []string{"adaptive_limit.max_limit"}},
		{"initial_limit below min_limit", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 50, InitialLimit: 5}
		}, "", "adaptive_limit.initial_limit", []string{"adaptive_limit.min_limit"}},
		{"initial_limit above max_limit", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 50, InitialLimit: 60}
		}, "", "adaptive_limit.initial_limit", []string{"adaptive_limit.max_limit"}},
		{"a stream's own adaptive limit", func(p *policy.Service) { watch(p).AdaptiveLimit = &policy.AdaptiveLimit{} }, "Watch", "adaptive_limit", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := withService()
			if prs := p.Problems(); len(prs) != 0 {
				t.Fatalf("the base policy is refused: %+v", prs)
			}
			tc.edit(p)
			var atKey []policy.Problem
			prs := p.Problems()
			for _, pr := range prs {
				checkReaders(t, pr)
				if !isOptionKey(pr.Key) {
					t.Errorf("Key %q of %q is no path of the options", pr.Key, pr.Message)
				}
				for _, k := range pr.With {
					if !isOptionKey(k) {
						t.Errorf("With holds %q, no path of the options, for %s: %s", k, pr.Key, pr.Message)
					}
				}
				if pr.Pair && len(pr.With) == 0 && pr.Method != "Watch" {
					t.Errorf("pair problem at %s of a unary method or the service names no other value: %s", pr.Key, pr.Message)
				}
				if pr.Method == tc.method && pr.Key == tc.key {
					atKey = append(atKey, pr)
				}
			}
			if len(atKey) == 0 {
				t.Fatalf("no problem at %s of %q; got %+v", tc.key, tc.method, prs)
			}
			// A stream may be refused at one key for several reasons.
			if !slices.ContainsFunc(atKey, func(pr policy.Problem) bool { return slices.Equal(pr.With, tc.with) }) {
				t.Errorf("%s: no problem with With = %q; got %+v", tc.key, tc.with, atKey)
			}
		})
	}
}

// TestGroupProblemsNameTheValuesInTheGroup: GroupProblems, which checks
// one group as written, names With inside the group, as it names Key.
func TestGroupProblemsNameTheValuesInTheGroup(t *testing.T) {
	r := withRetry()
	r.MaxBackoff = time.Millisecond
	for _, tc := range []struct {
		name      string
		group     any
		key, with string
	}{
		{"retry", r, "max_backoff", "initial_backoff"},
		{"method", &policy.Method{Timeout: 2 * time.Second, OverallTimeout: time.Second}, "timeout", "overall_timeout"},
		{"cache", &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Millisecond, MaxEntries: 1}, "stale_ttl", "fresh_ttl"},
		{"adaptive", &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 4, InitialLimit: 5, Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: time.Second}, "initial_limit", "max_limit"},
		{"shedding", &policy.Shedding{Limits: policy.Limits{Low: 10, Normal: 5, High: 20, Critical: 30}, Pushback: time.Second, Code: codes.Unavailable}, "normal", "low"},
		{"server method", &policy.ServerMethod{MinDeadline: time.Second, DefaultTimeout: time.Millisecond}, "default_timeout", "min_deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, pr := range policy.GroupProblems(tc.group) {
				if pr.Key == tc.key {
					got = pr.With
				}
			}
			if !slices.Equal(got, []string{tc.with}) {
				t.Errorf("problem at %s: With = %q, want [%s]", tc.key, got, tc.with)
			}
		})
	}
}

// isOptionKey reports whether key is the path of a field of the options
// (resilient.v1.Policy): "retry", "retry.initial_backoff", "timeout".
func isOptionKey(key string) bool {
	md := (&resilientv1.Policy{}).ProtoReflect().Descriptor()
	parts := strings.Split(key, ".")
	for i, part := range parts {
		fd := md.Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			return false
		}
		if i < len(parts)-1 {
			if md = fd.Message(); md == nil {
				return false
			}
		}
	}
	return key != ""
}

// TestEveryPairCheckNamesItsValues reads the package's checks: a check of
// two values (reporter.pair) passes the values it relates, and only one
// about a stream, whose kind no option sets, may pass none. So a new pair
// check that forgets its With fails here, whether or not a case of
// TestProblemsNameTheValuesTheyRelate reaches it.
func TestEveryPairCheckNamesItsValues(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "pair" {
				return true
			}
			calls++
			if len(call.Args) < 4 {
				t.Errorf("%s: pair with %d arguments", fset.Position(call.Pos()), len(call.Args))
				return true
			}
			with := call.Args[2]
			if id, ok := with.(*ast.Ident); ok && id.Name == "nil" {
				var problem strings.Builder
				printer.Fprint(&problem, fset, call.Args[3])
				if !strings.Contains(strings.ToLower(problem.String()), "stream") {
					t.Errorf("%s: a pair check names no other value (With nil) and is not about a stream: %s", fset.Position(call.Pos()), problem.String())
				}
			}
			return true
		})
	}
	if calls < 20 {
		t.Fatalf("found %d pair checks: the scan misses them", calls)
	}
}
