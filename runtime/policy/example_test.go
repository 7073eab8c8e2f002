package policy_test

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

func ExampleCodesOf() {
	s := policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	fmt.Println(s)
	fmt.Println(s.Has(codes.Unavailable), s.Has(codes.NotFound))
	// Output:
	// [DEADLINE_EXCEEDED UNAVAILABLE]
	// true false
}

func ExampleService_Validate() {
	p := &policy.Service{
		Name: "example.payments.v1.PaymentService",
		Methods: []policy.Method{{
			Name:    "/example.payments.v1.PaymentService/Charge",
			Timeout: 2 * time.Second, OverallTimeout: time.Second,
			Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2},
		}},
	}
	fmt.Println(p.Validate())
	// Output:
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Timeout: Timeout 2s is longer than OverallTimeout 1s: one attempt cannot outlast the whole call; shorten Timeout or lengthen OverallTimeout
	// resilient: policy example.payments.v1.PaymentService: Methods[0] (/example.payments.v1.PaymentService/Charge).Retry: Charge is not idempotent and has no IdempotencyKey, so a retry could apply it twice: do not retry it (no Retry, or Retry.MaxAttempts 1)
}

func ExampleCodeSet_Codes() {
	fmt.Println(policy.CodesOf(codes.Unavailable, codes.Canceled).Codes())
	// Output:
	// [Canceled Unavailable]
}
