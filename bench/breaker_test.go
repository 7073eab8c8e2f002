package bench

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// The circuit breaker alone, closed, with one successful call admitted and
// recorded per operation. The runtime's breaker is internal to it: it is
// measured through a unary handle whose policy has a breaker and nothing
// else, around a call that answers at once, as gobreaker's Execute is
// around its function. The runtime's breaker alone, with the time given,
// is BenchmarkBreakerFixedTime in runtime/breaker_test.go.

var breakerPolicy = policy.Breaker{
	FailureRatio:   0.5,
	MinimumCalls:   20,
	Window:         10 * time.Second,
	CoolDown:       2 * time.Second,
	HalfOpenProbes: 3,
	FailureCodes:   policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded),
}

// gobreakerSettings are breakerPolicy in gobreaker's terms: a rolling
// window of ten one-second buckets, opening at half failures over at least
// 20 calls, two seconds open, three half-open probes.
var gobreakerSettings = gobreaker.Settings{
	Name:         "inventory",
	MaxRequests:  3,
	Interval:     10 * time.Second,
	BucketPeriod: time.Second,
	Timeout:      2 * time.Second,
	ReadyToTrip: func(c gobreaker.Counts) bool {
		return c.Requests >= 20 && float64(c.TotalFailures) >= 0.5*float64(c.Requests)
	},
}

var errRefused = errors.New("refused")

// breakerOp returns one admitted-and-recorded call through a fresh breaker
// of impl.
func breakerOp(b *testing.B, impl string) func() {
	switch impl {
	case "resilient":
		h := newHandle(b, &policy.Service{
			Name:    "example.inventory.v1.InventoryService",
			Breaker: &breakerPolicy,
			Methods: []policy.Method{{Name: method, Kind: policy.KindUnary}},
		})
		ctx := context.Background()
		return func() {
			if _, err := h.Call(ctx, request); err != nil {
				panic(err)
			}
		}
	case "gobreaker":
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreakerSettings)
		call := func() (struct{}, error) { return struct{}{}, nil }
		return func() {
			if _, err := cb.Execute(call); err != nil {
				panic(err)
			}
		}
	case "gobreaker-twostep":
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreakerSettings)
		return func() {
			done, err := cb.Allow()
			if err != nil {
				panic(err)
			}
			done(nil)
		}
	}
	b.Fatalf("unknown impl %q", impl)
	return nil
}

var breakerImpls = []string{"resilient", "gobreaker", "gobreaker-twostep"}

// BenchmarkBreakerSerial runs the breaker from the benchmark's goroutine.
func BenchmarkBreakerSerial(b *testing.B) {
	for _, impl := range breakerImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			op := breakerOp(b, impl)
			b.ReportAllocs()
			for b.Loop() {
				op()
			}
		})
	}
}

// BenchmarkBreaker shares one breaker between 1, 2, 8 and 64 goroutines.
// ns/op is wall time per call: a breaker that scales keeps it flat (or
// lower, up to the number of cores) as goroutines are added.
func BenchmarkBreaker(b *testing.B) {
	for _, impl := range breakerImpls {
		for _, g := range []int{1, 2, 8, 64} {
			b.Run("impl="+impl+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				parallel(b, g, breakerOp(b, impl))
			})
		}
	}
}

// BenchmarkTimeNow is the price of one reading of the clock on the machine
// that runs the benchmarks. The runtime's breaker and gobreaker both read
// it twice per call; on a virtual machine it can be most of their cost.
func BenchmarkTimeNow(b *testing.B) {
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}
