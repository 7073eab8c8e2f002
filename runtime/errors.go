package runtime

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The sentinels below match, with errors.Is, the errors the runtime returns
// when it refuses a call or a retry itself, without the dependency having
// answered. Those errors are also gRPC status errors, so status.Code keeps
// working on them.
var (
	// ErrCircuitOpen: the circuit breaker towards the dependency is open (or
	// half-open with every probe taken). Code UNAVAILABLE.
	ErrCircuitOpen = errors.New("circuit breaker open")
	// ErrBulkheadFull: every permit of the bulkhead was taken for longer than
	// the policy lets a call wait. Code RESOURCE_EXHAUSTED.
	ErrBulkheadFull = errors.New("bulkhead full")
	// ErrBudgetExhausted: a retry was refused because the dependency's retry
	// budget was spent. The error carries the code and message of the last
	// attempt, which is what the caller is told.
	ErrBudgetExhausted = errors.New("retry budget exhausted")
	// ErrRateLimited: the client's own rate limit towards the dependency
	// refused the call, at once or because the wait for a token would have
	// passed the policy's max wait or the call's deadline. Code
	// RESOURCE_EXHAUSTED.
	ErrRateLimited = errors.New("rate limited")
	// ErrRetriesExhausted: every attempt (or hedged copy) the policy allows
	// was made and each failed transiently. The error carries the code,
	// message and details of the last attempt. It is not a refusal: the
	// dependency was called, as often as the policy allows, so a caller
	// above (a server handling its own request) should not retry in turn.
	ErrRetriesExhausted = errors.New("retries exhausted")
	// ErrAttemptTimeout: an attempt (or hedged copy) was cut by the
	// method's own per-attempt timeout while the call still had time, or
	// a cache's shared call of a method without OverallTimeout by its
	// limit, which is made of those timeouts. Code
	// DEADLINE_EXCEEDED, like the caller's own deadline, which does not
	// match it: that one is the plain context error gRPC returns.
	ErrAttemptTimeout = errors.New("per-attempt timeout")
)

// Error is an error of the runtime's own making: a refusal (see the
// sentinels) or a bad use of the API. It is a gRPC status error, it matches
// its sentinel and its cause with errors.Is, and it says which dependency and
// method it concerns and, for a refusal, when trying again may help.
type Error struct {
	// Code is the gRPC code the error reports through status.Code.
	Code codes.Code
	// Dependency is the full name of the service called.
	Dependency string
	// Method is the full method name ("/pkg.Service/Method"), when known.
	Method string
	// Reason is the sentinel the error matches, nil for a bad use of the
	// API (and for a cache's shared call that runtime.Goexit ended, which
	// follows from one: t.FailNow off a test's goroutine).
	Reason error
	// RetryAfter is how long the refusal is expected to last, 0 if unknown.
	RetryAfter time.Duration
	// Cause is the last error the dependency returned before the refusal,
	// if any.
	Cause error
	// Detail says what happened, in a sentence.
	Detail string
}

func (e *Error) Error() string {
	msg := "resilient: " + e.Detail
	if e.Method != "" {
		msg += " (" + e.Method + ")"
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf("; retry in %s", e.RetryAfter.Round(time.Millisecond))
	}
	if e.Cause != nil {
		msg += "; last error: " + e.Cause.Error()
	}
	return msg
}

// GRPCStatus makes the error a gRPC status error. When the cause is a
// status error with the same code, its details (a do-not-retry mark, a
// RetryInfo) are kept, so that they travel on.
func (e *Error) GRPCStatus() *status.Status {
	if st, ok := status.FromError(e.Cause); ok && st.Code() == e.Code && len(st.Proto().GetDetails()) > 0 {
		p := st.Proto()
		p.Message = e.Error()
		return status.FromProto(p)
	}
	return status.New(e.Code, e.Error())
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	switch {
	case e.Reason != nil && e.Cause != nil:
		return []error{e.Reason, e.Cause}
	case e.Reason != nil:
		return []error{e.Reason}
	case e.Cause != nil:
		return []error{e.Cause}
	}
	return nil
}

func circuitOpenError(dep, method string, retryAfter time.Duration, cause error) error {
	return &Error{Code: codes.Unavailable, Dependency: dep, Method: method, Reason: ErrCircuitOpen,
		RetryAfter: retryAfter, Cause: cause, Detail: "circuit breaker open towards " + dep}
}

func bulkheadFullError(dep, method string, permits int, waited time.Duration) error {
	return &Error{Code: codes.ResourceExhausted, Dependency: dep, Method: method, Reason: ErrBulkheadFull,
		Detail: fmt.Sprintf("bulkhead towards %s full: %d calls in flight, waited %s", dep, permits, waited)}
}

// budgetExhaustedError keeps the code of the last real error: that is the
// answer; the refused retry only explains why there is no other.
func budgetExhaustedError(dep, method string, last error) error {
	return &Error{Code: status.Code(last), Dependency: dep, Method: method, Reason: ErrBudgetExhausted,
		Cause: last, Detail: "retry budget towards " + dep + " exhausted"}
}

func rateLimitedError(dep, method string, wait time.Duration, why string) error {
	return &Error{Code: codes.ResourceExhausted, Dependency: dep, Method: method, Reason: ErrRateLimited,
		RetryAfter: wait, Detail: "rate limit towards " + dep + " reached: " + why}
}

// retriesExhaustedError keeps the code and details of the last real error,
// as budgetExhaustedError does.
func retriesExhaustedError(dep, method string, attempts int, what string, last error) error {
	return &Error{Code: status.Code(last), Dependency: dep, Method: method, Reason: ErrRetriesExhausted,
		Cause: last, Detail: fmt.Sprintf("%d %s towards %s failed", attempts, what, dep)}
}

// attemptTimeoutError is the DEADLINE_EXCEEDED of an attempt cut by its
// own timeout: which attempt, of which method, after how long.
func attemptTimeoutError(dep, method string, attempt int, timeout time.Duration, last error) error {
	return &Error{Code: codes.DeadlineExceeded, Dependency: dep, Method: method, Reason: ErrAttemptTimeout,
		Cause: last, Detail: fmt.Sprintf("attempt %d towards %s cut by its per-attempt timeout of %s", attempt, dep, timeout)}
}

// sharedCallBoundError is the DEADLINE_EXCEEDED of a cache's shared call
// of a retried or hedged method without OverallTimeout cut by its limit,
// the bound of its attempts' (or copies') timeouts and the waits between
// them (see bound.Call).
func sharedCallBoundError(dep, method string, limit, timeout time.Duration, last error) error {
	return &Error{Code: codes.DeadlineExceeded, Dependency: dep, Method: method, Reason: ErrAttemptTimeout,
		Cause: last, Detail: fmt.Sprintf("shared call of the cache towards %s cut at its limit of %s, the bound of its attempts of %s each and the waits between them", dep, limit, timeout)}
}

// sharedCallGoexitError is what the callers waiting for a cache's shared
// call get when runtime.Goexit ended its goroutine (t.FailNow in an
// interceptor or an observer run there, or a hedged copy's, handed on):
// INTERNAL, no answer, and no sentinel, as for a bad use of the API: the
// fault is the client's own, which neither a stale answer nor the
// fallback stands in for (see standsFor), as for a panic.
func sharedCallGoexitError(dep, method string) error {
	return &Error{Code: codes.Internal, Dependency: dep, Method: method,
		Detail: "the cache's shared call towards " + dep + " ended without an answer: runtime.Goexit (as t.FailNow calls) " +
			"ended its goroutine, called by an interceptor, an observer or a hedged copy"}
}

func misuseError(code codes.Code, method, detail string) error {
	return &Error{Code: code, Method: method, Detail: detail}
}

func statusFromContext(err error) error { return status.FromContextError(err).Err() }
