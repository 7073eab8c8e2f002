package runtime_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-resilient/resilient/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Timeout: 2s is longer than OverallTimeout 1s
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Retry: the method is neither idempotent nor has an idempotency key: retrying it could repeat its effect
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
