package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/runtime"
)

// checkDeadline refuses a request whose deadline has passed or leaves less
// than min: nobody would read its answer. The first check of a request by
// a Guard (atDoor: its tap, or its interceptor without it) refuses for
// the time the caller left, marked DEADLINE_TOO_SHORT (deadlineRefusal);
// a later one (before the handler, after a claim or a wait) refuses for
// time this server spent since the door let the request in (a slow outer
// interceptor, decoding, the store), which is this server's failure, so
// the refusal is judged by its code (lateDeadlineRefusal).
func checkDeadline(ctx context.Context, method string, min time.Duration, atDoor bool) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return status.Errorf(codes.Canceled, "resilient: the caller of %s cancelled it before it was started", method)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	if left >= min && left > 0 {
		return nil
	}
	refusal := lateDeadlineRefusal
	if atDoor {
		refusal = deadlineRefusal
	}
	if left <= 0 {
		return refusal(method, fmt.Sprintf("resilient: the deadline of %s passed before it was started", method))
	}
	return refusal(method, fmt.Sprintf("resilient: %s needs at least %s, the caller left %s",
		method, min, left.Round(time.Microsecond)))
}

// deadlineDetails mark a refusal for a deadline too short to start: the
// caller's time was short, which says nothing of the service, so the
// client's breaker counts it as nothing (runtime.DeadlineReason); and a
// retry would have less time still (the do-not-retry mark).
var deadlineDetails = []*anypb.Any{markDetail(runtime.DeadlineReason, nil), doNotRetryDetail}

// deadlineRefusal is the DEADLINE_EXCEEDED answer to a request refused
// for its deadline, with msg and the marks of deadlineDetails.
func deadlineRefusal(method, msg string) error {
	return refuse(method, &spb.Status{Code: int32(codes.DeadlineExceeded), Message: msg, Details: deadlineDetails})
}

// lateDetails mark a refusal for a deadline that became too short inside
// this server: do-not-retry only (a retry would have less time still);
// the breaker counts it by its code, as this server's failure.
var lateDetails = []*anypb.Any{doNotRetryDetail}

// lateDeadlineRefusal is the DEADLINE_EXCEEDED answer to a request the
// door admitted whose deadline this server's own delay made too short,
// with msg and lateDetails.
func lateDeadlineRefusal(method, msg string) error {
	return refuse(method, &spb.Status{Code: int32(codes.DeadlineExceeded), Message: msg + " (it had enough when it arrived: the time went in this server)", Details: lateDetails})
}

// ownTimeoutKey marks a context whose deadline is the DefaultTimeout the
// Guard gave a request of m that came without one; cancel stops its timer.
type ownTimeoutKey struct{}

type ownTimeout struct {
	m      *method
	cancel context.CancelFunc
	// first is the cancel of the first DefaultTimeout a Guard gave the
	// request (cancel, or that of another Guard's tap before this one's,
	// whose context this one's descends from): a tap that refuses the
	// request stops them all with it (tapRefused).
	first context.CancelFunc
}

// ownTimeoutOf returns the DefaultTimeout the Guard gave ctx's request of
// m, if it gave one.
func ownTimeoutOf(ctx context.Context, m *method) (ownTimeout, bool) {
	ot, ok := ctx.Value(ownTimeoutKey{}).(ownTimeout)
	return ot, ok && ot.m == m
}

// withDefaultTimeout bounds ctx by m's DefaultTimeout when the caller sent
// no deadline; the cancel it returns is that of the TapHandle's timeout
// when the tap gave it (withTapTimeout).
func withDefaultTimeout(ctx context.Context, m *method) (context.Context, context.CancelFunc) {
	ctx = withTapTimeout(ctx, m) // none when the tap gave it: ctx has its deadline
	if ot, ok := ownTimeoutOf(ctx, m); ok {
		return ctx, ot.cancel
	}
	return ctx, func() {}
}

// minDeadlineFor is the MinDeadline that the request of ctx must still
// have left: m's, or zero when its deadline is the DefaultTimeout the
// Guard gave a request that came without one. That deadline is the
// server's own bound, not what a caller left, so a request that sent none
// is never refused for having too little of it (with a DefaultTimeout
// equal to MinDeadline, every such request would be), only once it has
// passed.
func minDeadlineFor(ctx context.Context, m *method) time.Duration {
	if m.minDeadline == 0 || givenByAGuard(ctx, m) {
		return 0
	}
	return m.minDeadline
}

// givenByAGuard reports whether ctx's deadline is the DefaultTimeout a
// Guard gave the request of m's method because it came without one: m's
// own Guard's, or that of another Guard on the same server with a policy
// for the method (two Guards, a library's beside the service's own),
// whose door the request passed first. Either way the caller left no
// deadline: MinDeadline does not apply to it (with a DefaultTimeout equal
// to MinDeadline, the inner Guard refused every request that sent none),
// and m's own DefaultTimeout, when shorter, still bounds the request.
func givenByAGuard(ctx context.Context, m *method) bool {
	ot, ok := ctx.Value(ownTimeoutKey{}).(ownTimeout)
	return ok && ot.m.name == m.name
}

// withTapTimeout bounds ctx by m's DefaultTimeout when the caller sent no
// deadline (another Guard's longer DefaultTimeout for the request is not
// the caller's, and is shortened), the cancel carried in the context. Given in the TapHandle, the
// context it returns becomes that of gRPC's transport stream, so the
// timeout also ends a Send blocked on flow control (a caller that reads
// nothing) and a Recv waiting for the caller, which wait on that context,
// not on the handler's. The interceptor calls the cancel when the handler
// returns; a request that never reaches it has its timer stopped when
// gRPC cancels the stream's context, the parent.
func withTapTimeout(ctx context.Context, m *method) context.Context {
	if m.defaultTimeout <= 0 {
		return ctx
	}
	if dl, ok := ctx.Deadline(); ok && (time.Until(dl) <= m.defaultTimeout || !givenByAGuard(ctx, m)) {
		// The caller's deadline, or a Guard's own that is already shorter.
		return ctx
	}
	first := context.CancelFunc(nil)
	if prev, ok := ctx.Value(ownTimeoutKey{}).(ownTimeout); ok && prev.m.name == m.name {
		first = prev.first
	}
	ctx, cancel := context.WithTimeout(ctx, m.defaultTimeout)
	if first == nil {
		first = cancel
	}
	return context.WithValue(ctx, ownTimeoutKey{}, ownTimeout{m, cancel, first})
}

// stopTimeouts stops the DefaultTimeouts the taps of Guards gave ctx's
// request of m's method before a tap refused it: gRPC never cancels the
// context of a stream its tap refused, and each timer (with its context,
// a child of the stream's) would otherwise run for all of its
// DefaultTimeout, one per refusal.
func stopTimeouts(ctx context.Context, m *method) {
	if ot, ok := ctx.Value(ownTimeoutKey{}).(ownTimeout); ok && ot.m.name == m.name {
		ot.first()
	}
}
