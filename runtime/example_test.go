package runtime_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-resilient/resilient/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func ExampleCodesOf() {
	s := runtime.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	fmt.Println(s)
	fmt.Println(s.Has(codes.Unavailable), s.Has(codes.NotFound))
	// Output:
	// [DEADLINE_EXCEEDED UNAVAILABLE]
	// true false
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
