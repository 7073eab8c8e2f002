package server

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
)

// refusal is a Guard's refusal of a request of method at its door (shed,
// or a deadline too short) or before its handler (a deadline made short
// in this server): the status st, sent as it is. Its type tells a Guard
// whose handler returns it (a Guard on the same server whose interceptor
// runs outside the refusing one's) that this server refused the request,
// so its marks are passed on (notRefusedHere), where the same status
// received from a dependency has them taken out.
type refusal struct {
	method string
	st     *status.Status
}

// refuse returns the refusal of method's request with the status sp.
func refuse(method string, sp *spb.Status) error {
	return &refusal{method: method, st: status.FromProto(sp)}
}

// refusef returns the refusal of method's request with code c and the
// message format makes of args: a Guard's answer to a keyed request it
// did not run the handler for, or whose outcome is another request's (its
// key's scope refused, the key sent twice or too long, the store failing,
// a lost lease). An outer Guard on the same server, deduplicating the
// method on a store of its own, never keeps it as the request's outcome
// (refusedHere), whatever its FinalCodes hold: the caller's corrected
// retry with the same key runs.
func refusef(method string, c codes.Code, format string, args ...any) error {
	return refuse(method, &spb.Status{Code: int32(c), Message: fmt.Sprintf(format, args...)})
}

func (r *refusal) Error() string              { return r.st.Err().Error() }
func (r *refusal) GRPCStatus() *status.Status { return r.st }

// notRefusedHere returns a handler's error without the Guard's refusal
// marks (runtime.ShedReason, runtime.DeadlineReason) that a dependency's
// refusal carries when the handler passes it on: a mark says that the
// server which sent it refused the request at its door for a reason that
// tells nothing of its health, and this server did not refuse it. Its
// callers' breakers then judge the failure by its code, as any other
// failure of this service's (the RetryInfo and the do-not-retry mark are
// left as they are). An error without a mark is returned as it is, and an
// error without details costs no decoding. The error returned still wraps
// err, so that errors.Is finds what err matched (runtime.ErrRetriesExhausted,
// ErrCircuitOpen, ErrBudgetExhausted, which the do-not-retry decision
// reads after this).
//
// A refusal of a Guard of this process for a request of method (refuse),
// or an error that wraps one (errors.As), is passed on as it is: it is
// this server's refusal of this request, by a Guard whose interceptor
// runs inside this one's (two Guards on one server), whatever an
// interceptor between them wrapped it in; a refusal of another method's
// request, which the handler called in-process, is not.
func notRefusedHere(err error, method string) error {
	if r := refusalIn(err); r != nil && r.method == method {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	// Details decodes without copying the status, and an error without
	// details costs nothing: the status is copied only where a mark is
	// taken out, once to read it and once to build the one sent.
	details := st.Details()
	if !holdsRefusalMark(details) {
		return err
	}
	sp := st.Proto()
	kept := sp.Details[:0]
	for i, a := range sp.Details {
		if !isRefusalMark(details[i]) {
			kept = append(kept, a)
		}
	}
	sp.Details = kept
	return &passedOn{err: err, st: status.FromProto(sp)}
}

// refusalIn returns the refusal err is or wraps, as errors.As finds it,
// nil when there is none. errors.As, not a type assertion alone: an
// interceptor of the server's own between two Guards may wrap the refusal
// (fmt.Errorf with %w, an error with a status of its own that unwraps to
// it), and it is still this server's. errors.As is called only for an
// error it could look into (one that unwraps or has an As method), whose
// target then costs an allocation: a handler's plain status error costs
// none.
func refusalIn(err error) *refusal {
	switch e := err.(type) {
	case *refusal:
		return e
	case interface{ Unwrap() error }, interface{ Unwrap() []error }, interface{ As(any) bool }:
		var r *refusal
		if errors.As(e, &r) {
			return r
		}
	}
	return nil
}

// refusedHere reports whether err is (or wraps) a Guard's refusal of a
// request of method: this request, refused by a Guard of this server
// whose interceptor runs inside the caller's, never an outcome to keep.
func refusedHere(err error, method string) bool {
	r := refusalIn(err)
	return r != nil && r.method == method
}

// holdsRefusalMark reports whether one of details (a status's, decoded)
// is a refusal mark.
func holdsRefusalMark(details []any) bool {
	for _, d := range details {
		if isRefusalMark(d) {
			return true
		}
	}
	return false
}

// isRefusalMark reports whether d, a decoded status detail, is one of the
// Guard's refusal marks (runtime.ShedReason, runtime.DeadlineReason).
func isRefusalMark(d any) bool {
	ei, ok := d.(*errdetails.ErrorInfo)
	return ok && ei.GetDomain() == runtime.DoNotRetryDomain &&
		(ei.GetReason() == runtime.ShedReason || ei.GetReason() == runtime.DeadlineReason)
}

// passedOn is a handler's error that passed on a dependency's marked
// refusal: gRPC sends st (the refusal's status without the marks), and
// errors.Is and errors.As still see err.
type passedOn struct {
	err error
	st  *status.Status
}

func (u *passedOn) Error() string              { return u.err.Error() }
func (u *passedOn) Unwrap() error              { return u.err }
func (u *passedOn) GRPCStatus() *status.Status { return u.st }
