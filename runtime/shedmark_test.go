package runtime

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestVerdictOfShedMarks: the breaker's verdict on a failure that carries
// the Guard's shed mark is ignored, on either code a Guard sheds with
// when the breaker lists it; every other mark, code or status is judged
// by its code alone. What pushback already read decides without a second
// look, the metrics' code is the status's in every case.
func TestVerdictOfShedMarks(t *testing.T) {
	mark := &errdetails.ErrorInfo{Reason: ShedReason, Domain: DoNotRetryDomain, Metadata: map[string]string{"priority": "low"}}
	with := func(c codes.Code, details ...protoadapt.MessageV1) error {
		st, err := status.New(c, "x").WithDetails(details...)
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	short := &errdetails.ErrorInfo{Reason: DeadlineReason, Domain: DoNotRetryDomain}
	dnr := &errdetails.ErrorInfo{Reason: DoNotRetryReason, Domain: DoNotRetryDomain}
	markAny, err := anypb.New(mark)
	if err != nil {
		t.Fatal(err)
	}
	okMarked := status.FromProto(&spb.Status{Code: int32(codes.OK), Details: []*anypb.Any{markAny}})
	m := &methodState{breaker: &breaker{p: policy.Breaker{FailureCodes: policy.CodesOf(codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Internal)}}}
	for _, tc := range []struct {
		name  string
		err   error
		known refusalMark
		want  outcome
	}{
		{"shed UNAVAILABLE", with(codes.Unavailable, mark), markUnread, outcomeIgnored},
		{"shed RESOURCE_EXHAUSTED", with(codes.ResourceExhausted, mark), markUnread, outcomeIgnored},
		{"shed, read by pushback", with(codes.Unavailable, mark), markShed, outcomeIgnored},
		{"plain UNAVAILABLE", with(codes.Unavailable), markUnread, outcomeFailure},
		{"plain, read by pushback", with(codes.Unavailable), markAbsent, outcomeFailure},
		{"the mark on INTERNAL", with(codes.Internal, mark), markUnread, outcomeFailure},
		{"the mark on DEADLINE_EXCEEDED, said present", with(codes.DeadlineExceeded, mark), markShed, outcomeFailure},
		{"another domain", with(codes.Unavailable, &errdetails.ErrorInfo{Reason: ShedReason, Domain: "example.com"}), markUnread, outcomeFailure},
		{"the mark on NOT_FOUND, an answer", with(codes.NotFound, mark), markUnread, outcomeSuccess},
		{"an OK status with the mark", oddOK{okMarked}, markUnread, outcomeSuccess},
		{"not a status", context.DeadlineExceeded, markUnread, outcomeFailure},
		{"too short a deadline", with(codes.DeadlineExceeded, short), markUnread, outcomeIgnored},
		{"too short, read by pushback", with(codes.DeadlineExceeded, short), markShortDeadline, outcomeIgnored},
		{"too short, after the do-not-retry mark", with(codes.DeadlineExceeded, dnr, short), markUnread, outcomeIgnored},
		{"the deadline mark on UNAVAILABLE", with(codes.Unavailable, short), markUnread, outcomeFailure},
		{"the deadline mark of another domain", with(codes.DeadlineExceeded, &errdetails.ErrorInfo{Reason: DeadlineReason, Domain: "example.com"}), markUnread, outcomeFailure},
		{"plain DEADLINE_EXCEEDED", with(codes.DeadlineExceeded), markUnread, outcomeFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, code := m.verdict(context.Background(), tc.err, tc.known)
			if o != tc.want || code != codeOf(tc.err) {
				t.Errorf("verdict: %v %v, want %v %v", o, code, tc.want, codeOf(tc.err))
			}
		})
	}
	// Without a breaker nothing is a failure, and nothing looks.
	if o, _ := (&methodState{}).verdict(context.Background(), with(codes.Unavailable, mark), markUnread); o != outcomeSuccess {
		t.Errorf("verdict without a breaker: %v, want success", o)
	}
}

type oddOK struct{ st *status.Status }

func (e oddOK) Error() string              { return "odd" }
func (e oddOK) GRPCStatus() *status.Status { return e.st }
