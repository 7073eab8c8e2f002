package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	testDep    = "example.inventory.v1.InventoryService"
	testMethod = "/example.inventory.v1.InventoryService/GetItem"
)

func TestRefusalErrors(t *testing.T) {
	last := status.Error(codes.DeadlineExceeded, "upstream slow")
	cause := status.Error(codes.Unavailable, "connection refused")
	for _, tc := range []struct {
		name     string
		err      error
		code     codes.Code
		sentinel error
		cause    error
		mentions []string
	}{
		{
			name: "circuit open", err: circuitOpenError(testDep, testMethod, 1500*time.Millisecond, cause),
			code: codes.Unavailable, sentinel: ErrCircuitOpen, cause: cause,
			mentions: []string{"circuit breaker open", testDep, testMethod, "retry in 1.5s", "connection refused"},
		},
		{
			name: "circuit open without cause", err: circuitOpenError(testDep, testMethod, 2*time.Second, nil),
			code: codes.Unavailable, sentinel: ErrCircuitOpen,
			mentions: []string{testDep, testMethod, "retry in 2s"},
		},
		{
			name: "bulkhead full", err: bulkheadFullError(testDep, testMethod, 8, 50*time.Millisecond),
			code: codes.ResourceExhausted, sentinel: ErrBulkheadFull,
			mentions: []string{"bulkhead", testDep, testMethod, "8 calls in flight", "waited 50ms"},
		},
		{
			name: "budget exhausted", err: budgetExhaustedError(testDep, testMethod, last),
			code: codes.DeadlineExceeded, sentinel: ErrBudgetExhausted, cause: last,
			mentions: []string{"retry budget", testDep, testMethod, "upstream slow"},
		},
		{
			name: "budget exhausted after UNAVAILABLE", err: budgetExhaustedError(testDep, testMethod, cause),
			code: codes.Unavailable, sentinel: ErrBudgetExhausted, cause: cause,
			mentions: []string{testDep, testMethod},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("calling inventory: %w", tc.err)} {
				if got := status.Code(err); got != tc.code {
					t.Errorf("status.Code = %s, want %s", got, tc.code)
				}
				s, ok := status.FromError(err)
				if !ok || s.Code() != tc.code {
					t.Errorf("status.FromError = (%v, %v), want a %s status", s, ok, tc.code)
				}
				if !errors.Is(err, tc.sentinel) {
					t.Errorf("errors.Is(err, %v) = false", tc.sentinel)
				}
				for _, other := range []error{ErrCircuitOpen, ErrBulkheadFull, ErrBudgetExhausted} {
					if other != tc.sentinel && errors.Is(err, other) {
						t.Errorf("errors.Is(err, %v) = true", other)
					}
				}
				if tc.cause != nil && !errors.Is(err, tc.cause) {
					t.Errorf("errors.Is(err, cause) = false")
				}
				if errors.Is(err, context.Canceled) {
					t.Errorf("errors.Is(err, context.Canceled) = true")
				}
				var re *Error
				if !errors.As(err, &re) || re.Dependency != testDep || re.Method != testMethod {
					t.Errorf("errors.As(*Error) = %+v", re)
				}
			}
			msg := tc.err.Error()
			for _, m := range tc.mentions {
				if !strings.Contains(msg, m) {
					t.Errorf("message %q does not mention %q", msg, m)
				}
			}
			if got := status.Convert(tc.err).Message(); got != msg {
				t.Errorf("status message %q, want %q", got, msg)
			}
		})
	}
}

func TestErrorMessageFormat(t *testing.T) {
	err := circuitOpenError(testDep, testMethod, 1234567*time.Microsecond, nil)
	want := "resilient: circuit breaker open towards " + testDep + " (" + testMethod + "); retry in 1.235s"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	// Without a method or a retry-after, neither is mentioned.
	e := &Error{Code: codes.Unavailable, Dependency: testDep, Reason: ErrCircuitOpen, Detail: "circuit breaker open towards " + testDep}
	if got, want := e.Error(), "resilient: circuit breaker open towards "+testDep; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestMisuseError(t *testing.T) {
	err := misuseError(codes.InvalidArgument, testMethod, "nil request")
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("code %s, want InvalidArgument", status.Code(err))
	}
	for _, s := range []error{ErrCircuitOpen, ErrBulkheadFull, ErrBudgetExhausted} {
		if errors.Is(err, s) {
			t.Fatalf("misuse error matches %v", s)
		}
	}
	if u := err.(*Error).Unwrap(); u != nil {
		t.Fatalf("Unwrap = %v, want nil", u)
	}
	if want := "resilient: nil request (" + testMethod + ")"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

func TestStatusFromContext(t *testing.T) {
	if c := status.Code(statusFromContext(context.Canceled)); c != codes.Canceled {
		t.Fatalf("Canceled → %s", c)
	}
	if c := status.Code(statusFromContext(context.DeadlineExceeded)); c != codes.DeadlineExceeded {
		t.Fatalf("DeadlineExceeded → %s", c)
	}
}
