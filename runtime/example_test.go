package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-resilient/resilient/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The breaker takes the time as a parameter, so its state machine can be
// driven without waiting: here a clock that starts at base.
func ExampleBreaker() {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := runtime.NewBreaker(runtime.BreakerPolicy{
		FailureRatio:   0.5,
		MinimumCalls:   4,
		Window:         10 * time.Second,
		CoolDown:       5 * time.Second,
		HalfOpenProbes: 1,
		FailureCodes:   runtime.CodesOf(codes.Unavailable),
	}, base, func(from, to runtime.State) { fmt.Printf("  %s -> %s\n", from, to) })

	now := base.Add(time.Second)
	for _, o := range []runtime.Outcome{runtime.Success, runtime.Failure, runtime.Success, runtime.Failure} {
		ticket, _, _ := b.Allow(now)
		b.Done(ticket, o, 20*time.Millisecond, now)
	}
	fmt.Println("after 2 failures in 4 calls:", b.State(now))

	_, retryAfter, ok := b.Allow(now.Add(2 * time.Second))
	fmt.Println("allowed:", ok, "retry after:", retryAfter)

	now = now.Add(5 * time.Second)
	fmt.Println("after the cool-down:", b.State(now))
	probe, _, ok := b.Allow(now)
	fmt.Println("probe allowed:", ok)
	_, _, ok = b.Allow(now)
	fmt.Println("second call allowed:", ok)
	b.Done(probe, runtime.Success, 20*time.Millisecond, now)
	fmt.Println("after the probe:", b.State(now))
	// Output:
	//   closed -> open
	// after 2 failures in 4 calls: open
	// allowed: false retry after: 3s
	// after the cool-down: half-open
	//   open -> half-open
	// probe allowed: true
	// second call allowed: false
	//   half-open -> closed
	// after the probe: closed
}

func ExampleBudget() {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := runtime.NewBudget(runtime.BudgetPolicy{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, base)
	now := base.Add(time.Second)
	fmt.Println("quiet client:", b.Available(now), "retries")
	for range 100 {
		b.Request(now)
	}
	fmt.Println("after 100 requests:", b.Available(now), "retries")
	granted := 0
	for b.TryRetry(now) {
		granted++
	}
	fmt.Println("granted:", granted)
	fmt.Println("11 s later:", b.Available(now.Add(11*time.Second)), "retries")
	// Output:
	// quiet client: 10 retries
	// after 100 requests: 20 retries
	// granted: 20
	// 11 s later: 10 retries
}

func ExampleBulkhead() {
	b := runtime.NewBulkhead(runtime.BulkheadPolicy{Permits: 2})
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		ok, _ := b.Acquire(ctx)
		fmt.Printf("call %d admitted: %v (in use %d)\n", i, ok, b.InUse())
	}
	b.Release()
	ok, _ := b.Acquire(ctx)
	fmt.Println("after a release:", ok)
	b.Release()
	b.Release()
	fmt.Println("in use at the end:", b.InUse())
	// Output:
	// call 1 admitted: true (in use 1)
	// call 2 admitted: true (in use 2)
	// call 3 admitted: false (in use 2)
	// after a release: true
	// in use at the end: 0
}

// Each wait is drawn uniformly below a bound that grows from
// InitialBackoff by Multiplier and stops at MaxBackoff.
func ExampleBackoff() {
	p := &runtime.RetryPolicy{
		MaxAttempts:    6,
		InitialBackoff: 100 * time.Millisecond,
		MaxBackoff:     time.Second,
		Multiplier:     2,
	}
	bound := p.InitialBackoff
	for n := 1; n <= 5; n++ {
		d := runtime.Backoff(p, n)
		fmt.Printf("retry %d waits in [0, %s): %v\n", n, bound, d >= 0 && d < bound)
		bound = min(bound*2, p.MaxBackoff)
	}
	// Output:
	// retry 1 waits in [0, 100ms): true
	// retry 2 waits in [0, 200ms): true
	// retry 3 waits in [0, 400ms): true
	// retry 4 waits in [0, 800ms): true
	// retry 5 waits in [0, 1s): true
}

func ExampleCodesOf() {
	s := runtime.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	fmt.Println(s)
	fmt.Println(s.Has(codes.Unavailable), s.Has(codes.NotFound))
	// Output:
	// [DEADLINE_EXCEEDED UNAVAILABLE]
	// true false
}

func ExampleParseCode() {
	for _, name := range []string{"RESOURCE_EXHAUSTED", "CANCELLED", "OK", "Unavailable"} {
		c, ok := runtime.ParseCode(name)
		fmt.Println(name, c, ok)
	}
	fmt.Println(runtime.CodeName(codes.DeadlineExceeded))
	// Output:
	// RESOURCE_EXHAUSTED ResourceExhausted true
	// CANCELLED Canceled true
	// OK OK true
	// Unavailable OK false
	// DEADLINE_EXCEEDED
}

func ExampleServicePolicy_Validate() {
	p := &runtime.ServicePolicy{
		Name: "example.payments.v1.PaymentService",
		Methods: []runtime.MethodPolicy{{
			Name:    "/example.payments.v1.PaymentService/Charge",
			Timeout: 2 * time.Second, OverallTimeout: time.Second,
			Retry: &runtime.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2},
		}},
	}
	fmt.Println(p.Validate())
	// Output:
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Timeout: timeout 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)
}

// A refusal of the runtime is a gRPC status error that also matches its
// sentinel.
func ExampleError() {
	var err error = &runtime.Error{
		Code:       codes.Unavailable,
		Dependency: "example.inventory.v1.InventoryService",
		Method:     "/example.inventory.v1.InventoryService/GetItem",
		Reason:     runtime.ErrCircuitOpen,
		RetryAfter: 3 * time.Second,
		Detail:     "circuit breaker open towards example.inventory.v1.InventoryService",
	}
	fmt.Println(status.Code(err))
	fmt.Println(errors.Is(err, runtime.ErrCircuitOpen), errors.Is(err, runtime.ErrBulkheadFull))
	fmt.Println(err)
	// Output:
	// Unavailable
	// true false
	// resilient: circuit breaker open towards example.inventory.v1.InventoryService (/example.inventory.v1.InventoryService/GetItem); retry in 3s
}
