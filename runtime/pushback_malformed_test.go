package runtime_test

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func retryIn(seconds int64, nanos int32) protoadapt.MessageV1 {
	return &errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: seconds, Nanos: nanos}}
}

// TestPushbackMalformedRetryInfoIsNoPushback: a RetryInfo whose delay is
// negative, or not a valid duration (nanos of the other sign, or beyond a
// second), says nothing: not "retry at once" (0, true), nor "do not
// retry". A well-formed one after it still counts; a delay beyond the
// longest Duration saturates.
func TestPushbackMalformedRetryInfoIsNoPushback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		details []protoadapt.MessageV1
		want    time.Duration
		ok      bool
	}{
		{"negative", []protoadapt.MessageV1{retryIn(-1, 0)}, 0, false},
		{"negative nanos", []protoadapt.MessageV1{retryIn(0, -5)}, 0, false},
		{"signs differ", []protoadapt.MessageV1{retryIn(1, -1)}, 0, false},
		{"nanos beyond a second", []protoadapt.MessageV1{retryIn(0, 1e9)}, 0, false},
		{"no delay", []protoadapt.MessageV1{&errdetails.RetryInfo{}}, 0, false},
		{"negative, then well-formed", []protoadapt.MessageV1{retryIn(-1, 0), retryIn(0, 2e8)}, 200 * time.Millisecond, true},
		{"zero: at once", []protoadapt.MessageV1{retryIn(0, 0)}, 0, true},
		{"beyond the longest Duration", []protoadapt.MessageV1{retryIn(math.MaxInt64/int64(time.Second)+1, 0)}, math.MaxInt64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := status.New(codes.Unavailable, "busy").WithDetails(tc.details...)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := runtime.Pushback(st.Err(), nil); d != tc.want || ok != tc.ok {
				t.Errorf("Pushback: %v %v, want %v %v", d, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPushbackNegativeRetryInfoKeepsTheRetries: a call to a server whose
// RetryInfo says -1 s makes the policy's three attempts, with the
// policy's backoff between them: the malformed delay is not read as "do
// not retry" either.
func TestPushbackNegativeRetryInfoKeepsTheRetries(t *testing.T) {
	srv, cc := start(t, func(context.Context, server.Call) error {
		st, _ := status.New(codes.Unavailable, "busy").WithDetails(retryIn(-1, 0))
		return st.Err()
	})
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(3)}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE", err)
	}
	if n := srv.Calls(getStock); n != 3 {
		t.Errorf("the server saw %d attempts, want the policy's 3", n)
	}
}

// oddStatus is an error whose status is OK yet carries details, as a
// hostile or broken library might make.
type oddStatus struct{ st *status.Status }

func (e oddStatus) Error() string              { return "odd" }
func (e oddStatus) GRPCStatus() *status.Status { return e.st }

// TestPushbackOddStatuses: an OK-coded status with the marks, a detail
// of a type no one registered, thousands of details: no panic, and the
// marks are read only where they mean something.
func TestPushbackOddStatuses(t *testing.T) {
	marks := []protoadapt.MessageV1{
		&errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain},
		retryIn(1, 0),
	}
	anys := make([]*anypb.Any, 0, len(marks))
	for _, m := range marks {
		a, err := anypb.New(protoadapt.MessageV2Of(m))
		if err != nil {
			t.Fatal(err)
		}
		anys = append(anys, a)
	}
	ok := status.FromProto(&spb.Status{Code: int32(codes.OK), Details: anys})
	if len(ok.Details()) != 3 {
		t.Fatalf("the OK status holds %d details, want 3", len(ok.Details()))
	}
	if d, said := runtime.Pushback(oddStatus{ok}, nil); d != 0 || said {
		t.Errorf("an OK status with the marks: %v %v, want nothing said", d, said)
	}
	many := make([]protoadapt.MessageV1, 0, 3001)
	for i := range 3000 {
		many = append(many, &errdetails.ErrorInfo{Reason: "OTHER", Domain: runtime.DoNotRetryDomain, Metadata: map[string]string{"i": string(rune('a' + i%26))}})
	}
	many = append(many, retryIn(0, 3e8))
	st, err := status.New(codes.Unavailable, "busy").WithDetails(many...)
	if err != nil {
		t.Fatal(err)
	}
	if d, said := runtime.Pushback(st.Err(), nil); d != 300*time.Millisecond || !said {
		t.Errorf("a RetryInfo after 3000 other details: %v %v, want 300ms", d, said)
	}
	ri, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(400 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	unknown := status.FromProto(&spb.Status{Code: int32(codes.Unavailable), Details: []*anypb.Any{
		{TypeUrl: "type.googleapis.com/nobody.Registered", Value: []byte{0xff, 0xff, 0xff}}, ri}})
	if d, said := runtime.Pushback(unknown.Err(), nil); d != 400*time.Millisecond || !said {
		t.Errorf("a RetryInfo after a detail of no known type: %v %v, want 400ms", d, said)
	}
}
