package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestHedgedCopyRefusedByTheGuardLeavesTheFirstToAnswer: a hedged copy
// that fails fatally is the call's answer, unless runtime/server's Guard
// marked it as refused for its own reason (shed for its priority, or sent
// too late to start) while another copy is in flight: that copy's answer
// is then the call's. The first copy answers OK after 200 ms, the second,
// sent 30 ms in, fails at once.
func TestHedgedCopyRefusedByTheGuardLeavesTheFirstToAnswer(t *testing.T) {
	const delay, first = 30 * time.Millisecond, 200 * time.Millisecond
	marked := func(c codes.Code, reason string) error {
		st, err := status.New(c, "refused on purpose").WithDetails(
			&errdetails.ErrorInfo{Reason: reason, Domain: runtime.DoNotRetryDomain, Metadata: map[string]string{"priority": "normal"}})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, tc := range []struct {
		name   string
		second error
		want   codes.Code // the call's answer
	}{
		{"shed, marked", marked(codes.ResourceExhausted, runtime.ShedReason), codes.OK},
		{"deadline too short, marked", marked(codes.DeadlineExceeded, runtime.DeadlineReason), codes.OK},
		{"RESOURCE_EXHAUSTED, unmarked", status.Error(codes.ResourceExhausted, "full on purpose"), codes.ResourceExhausted},
		{"the shed mark of another domain", func() error {
			st, _ := status.New(codes.ResourceExhausted, "x").WithDetails(&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: "example.com"})
			return st.Err()
		}(), codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
				if n.Add(1) == 1 {
					return server.Wait(ctx, first)
				}
				return tc.second
			})
			c := invClient(t, cc, nil, func(p *policy.Service) {
				getStockPolicy(time.Second, 1)(p)
				p.Methods[0].Hedging = &policy.Hedging{Delay: delay, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
			})
			took, err := getStockOf(context.Background(), c)
			if status.Code(err) != tc.want {
				t.Fatalf("%v after %v, want %v", err, took, tc.want)
			}
			if tc.want == codes.OK {
				within(t, "the call", took, first, first+300*time.Millisecond)
			} else if took >= first {
				t.Errorf("the call ended after %v, want the second copy's failure, at about %v", took, delay)
			}
			if got := srv.Calls(getStock); got != 2 {
				t.Errorf("the server saw %d copies, want 2", got)
			}
		})
	}
}
