// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/contract"
)

// CodeSet is a set of gRPC status codes, one bit per code.
type CodeSet uint32

// CodesOf returns the set holding the given codes.
func CodesOf(cs ...codes.Code) CodeSet {
	var s CodeSet
	for _, c := range cs {
		if c < 32 {
			s |= 1 << c
		}
	}
	return s
}

// Has reports whether c is in the set.
func (s CodeSet) Has(c codes.Code) bool { return c < 32 && s&(1<<c) != 0 }

// Codes lists the codes of the set in the order of their numbers.
func (s CodeSet) Codes() []codes.Code {
	var out []codes.Code
	for c := codes.Code(0); c < 32; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// String lists the codes by name in the order of their numbers, as in
// "[DEADLINE_EXCEEDED UNAVAILABLE]".
func (s CodeSet) String() string {
	var names []string
	for _, c := range s.Codes() {
		names = append(names, codename.Of(c))
	}
	return "[" + strings.Join(names, " ") + "]"
}

// Service is the compiled policy of one service: the dependency a
// client calls. Generated code holds one as a Go literal; NewClient turns it
// into the shared state of one client.
type Service struct {
	// Name is the full name of the service ("example.inventory.v1.InventoryService").
	// It names the dependency in errors, logs and metrics.
	Name string
	// Budget bounds the retries of every method of the service together.
	// It is used only by methods that retry or hedge; nil means the defaults of
	// DefaultBudget.
	Budget *Budget
	// Breaker is the circuit breaker shared by every method that has no
	// breaker of its own. Nil means none.
	Breaker *Breaker
	// Bulkhead is the bulkhead shared by every method that has no bulkhead of
	// its own. Nil means none.
	Bulkhead *Bulkhead
	// RateLimit is the token bucket shared by every method that has no rate
	// limit of its own. Nil means none.
	RateLimit *RateLimit
	// AdaptiveLimit is the adaptive concurrency limit shared by every unary
	// method that has none of its own, under the shared bulkhead (its
	// permits are the ceiling). Nil means none.
	AdaptiveLimit *AdaptiveLimit
	// ClientThrottle is the client-side throttler of the dependency, asked by
	// every attempt of every unary method. Nil means none.
	ClientThrottle *Throttle
	// Methods holds one policy per method, in the order of the .proto file.
	Methods []Method
}

// Kind is the kind of an RPC.
type Kind uint8

// The four kinds of RPC.
const (
	KindUnary Kind = iota
	KindClientStreaming
	KindServerStreaming
	KindBidiStreaming
)

// String names k in errors and in Describe: "unary", "client-streaming",
// "server-streaming", "bidirectional", or "Kind(n)" for none of the four.
func (k Kind) String() string {
	switch k {
	case KindUnary:
		return "unary"
	case KindClientStreaming:
		return "client-streaming"
	case KindServerStreaming:
		return "server-streaming"
	case KindBidiStreaming:
		return "bidirectional"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Method is the compiled policy of one method.
type Method struct {
	// Name is the full method name as gRPC sends it: "/pkg.Service/Method".
	Name string
	// Kind is the kind of RPC.
	Kind Kind
	// Idempotent says whether the method may be repeated.
	Idempotent bool
	// IdempotencyKey names the request field whose value generated code
	// sends as the idempotency-key metadata, empty for none. It is what
	// makes a method that is not idempotent safe to retry: Validate refuses
	// the retries of such a method unless it or GenerateIdempotencyKey is
	// set; NewClient refuses an edit that names another field (generated
	// code reads the annotated one); Describe shows it.
	IdempotencyKey string
	// GenerateIdempotencyKey makes the runtime send a random idempotency
	// key, the same on every attempt and hedge of one call, when the call
	// has none of its own. Like a key field, it allows retries of a method
	// that is not idempotent; it protects only the client's own retries.
	GenerateIdempotencyKey bool
	// Timeout is the limit of one attempt; 0 means none.
	Timeout time.Duration
	// OverallTimeout is the limit of the whole call, retries included; 0
	// means none.
	OverallTimeout time.Duration
	// Retry, when not nil, repeats failed attempts.
	Retry *Retry
	// Breaker, when not nil, gives the method a breaker of its own instead of
	// the service's.
	Breaker *Breaker
	// Bulkhead, when not nil, gives the method a bulkhead of its own instead
	// of the service's.
	Bulkhead *Bulkhead
	// Hedging, when not nil, sends further copies of a slow call and keeps
	// the first answer. Not together with Retry.
	Hedging *Hedging
	// RateLimit, when not nil, gives the method a token bucket of its own
	// instead of the service's.
	RateLimit *RateLimit
	// Cache, when not nil, keeps the method's answers (see Cache).
	Cache *Cache
	// AdaptiveLimit, when not nil, gives the unary method an adaptive
	// concurrency limit of its own instead of the service's, under the
	// method's bulkhead (or the service's).
	AdaptiveLimit *AdaptiveLimit
	// Priority is the method's annotated priority, sent to the server in
	// PriorityHeader on each call; a caller may lower it, never
	// raise it. Unspecified sends none.
	Priority Priority
}

// Retry says when and how often a failed attempt is repeated.
type Retry struct {
	// MaxAttempts is the number of attempts in all, the first included.
	MaxAttempts int
	// InitialBackoff bounds the first wait; each wait is drawn uniformly in
	// [0, bound) (full jitter).
	InitialBackoff time.Duration
	// MaxBackoff caps the bound.
	MaxBackoff time.Duration
	// Multiplier grows the bound after each retry.
	Multiplier float64
	// RetryableCodes are the codes after which an attempt is repeated.
	RetryableCodes CodeSet
}

// Budget caps the retries towards a dependency: over Window, retries
// may not exceed Ratio times the requests, plus MinRetries. A retry stays
// counted at least Window, a request at most Window.
type Budget struct {
	Ratio      float64
	MinRetries int
	Window     time.Duration
}

// DefaultBudget is the retry budget of a service that retries without
// setting one: 10 % of the requests plus 10 retries per 10 s.
var DefaultBudget = Budget{Ratio: contract.BudgetRatio, MinRetries: contract.BudgetMinRetries, Window: contract.BudgetWindow}

// BudgetInForce returns the budget that bounds the service's retries:
// Budget, or, when it is nil and a method retries or hedges, a copy of
// DefaultBudget; nil when there is none.
func (p *Service) BudgetInForce() *Budget {
	if p.Budget != nil {
		return p.Budget
	}
	for i := range p.Methods {
		if m := &p.Methods[i]; (m.Retry != nil && m.Retry.MaxAttempts > 1) || m.Hedging != nil {
			b := DefaultBudget
			return &b
		}
	}
	return nil
}

// Breaker configures a circuit breaker.
type Breaker struct {
	// FailureRatio is the share of failures in the window at which the
	// breaker opens, in (0, 1].
	FailureRatio float64
	// MinimumCalls is the number of calls the window must hold before the
	// ratio is judged.
	MinimumCalls int
	// Window is the sliding window of outcomes in time. It is ignored when
	// WindowCalls is set.
	Window time.Duration
	// WindowCalls, when positive, makes the window the last WindowCalls
	// outcomes, whatever their age (resilience4j's count-based window),
	// instead of Window. At most 2^21.
	WindowCalls int
	// CoolDown is how long the breaker stays open before probing.
	CoolDown time.Duration
	// HalfOpenProbes is the number of probes let through when half-open.
	HalfOpenProbes int
	// SlowCallThreshold, when positive, makes a success slower than it a
	// failure.
	SlowCallThreshold time.Duration
	// FailureCodes are the codes that count as failures of the dependency.
	FailureCodes CodeSet
}

// Bulkhead configures a bulkhead.
type Bulkhead struct {
	// Permits is the number of calls in flight at once.
	Permits int
	// MaxWait is how long a call may wait for a permit; 0 refuses at once.
	MaxWait time.Duration
}

// Clone returns a deep copy of p: changing the copy, its methods or any of
// their settings leaves p as it was.
func (p *Service) Clone() Service {
	c := *p
	c.Budget = clone(p.Budget)
	c.Breaker = clone(p.Breaker)
	c.Bulkhead = clone(p.Bulkhead)
	c.RateLimit = clone(p.RateLimit)
	c.AdaptiveLimit = clone(p.AdaptiveLimit)
	c.ClientThrottle = clone(p.ClientThrottle)
	c.Methods = make([]Method, len(p.Methods))
	for i, m := range p.Methods {
		m.Retry = clone(m.Retry)
		m.Breaker = clone(m.Breaker)
		m.Bulkhead = clone(m.Bulkhead)
		m.Hedging = clone(m.Hedging)
		m.RateLimit = clone(m.RateLimit)
		m.Cache = clone(m.Cache)
		if m.Cache != nil {
			m.Cache.KeyFields = slices.Clone(m.Cache.KeyFields)
		}
		m.AdaptiveLimit = clone(m.AdaptiveLimit)
		c.Methods[i] = m
	}
	return c
}

func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}
