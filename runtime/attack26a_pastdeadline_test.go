package runtime_test

// The caller's deadline × the moment it passes: README, Semantics, Order
// of the layers ("a call or stream whose context is already over (its
// deadline passed, or cancelled) is answered at once with
// DEADLINE_EXCEEDED ... before any layer: ... no half-open probe ... and
// the breaker and the attempt metrics learn nothing of it") and Deadlines
// ("so it is when the deadline passes between the end of the wait and the
// retry, which is then not sent nor counted as made"). A context made by
// context.WithDeadline reports nothing through Err until its timer has
// run, which on a loaded machine comes after the deadline; gRPC looks at
// the deadline itself (time.Until(deadline) <= 0) and refuses to send,
// with DEADLINE_EXCEEDED. The runtime asks only ctx.Err(), so it takes
// the call for live, hands it to gRPC, and counts gRPC's refusal as the
// dependency not answering in time.

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk26aPastDeadline returns a context.WithTimeout of 100 µs whose
// deadline has passed by 50 µs and whose timer has not run: the goroutine
// spins past the deadline on the only P (GOMAXPROCS 1, set by the caller),
// as a goroutine that a loaded machine did not schedule in time finds its
// context. Err still says nil; the deadline is over.
func atk26aPastDeadline() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Microsecond)
	dl, _ := ctx.Deadline()
	for time.Now().Before(dl.Add(50 * time.Microsecond)) {
	}
	return ctx, cancel
}

// TestAttack26APastDeadlineCallsCountForNothing: 30 GetStock calls under
// the annotated policy (breaker, metrics; a fallback given) towards a healthy server, each
// made with a context whose deadline passed before the call (its timer
// not yet run). The promise: each is answered DEADLINE_EXCEEDED before any
// layer, the server sees none, no fallback answers, the attempt metrics count none and the
// breaker stays closed, so that the next live call goes through. Today
// (19 of 30 in the first run) each is handed to gRPC, which refuses to
// send it, the fallback answers it, the breaker counts it as a failure of the dependency and opens
// towards a server that saw nothing, and the next live call is refused
// with ErrCircuitOpen (and so were 11 of the 30).
func TestAttack26APastDeadlineCallsCountForNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	reg := prometheus.NewRegistry()
	var fellBack atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			return nil, status.Error(codes.Aborted, "the fallback answered")
		}}, nil)
	// The connection is up: a past-deadline call finds gRPC ready.
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatal(err)
	}
	before := fs.Calls(atkGetStock)

	prev := goruntime.GOMAXPROCS(1)
	defer goruntime.GOMAXPROCS(prev)
	got := map[codes.Code]int{}
	for range 30 {
		ctx, cancel := atk26aPastDeadline()
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		cancel()
		got[status.Code(err)]++
	}
	goruntime.GOMAXPROCS(prev)

	seenDead := fs.Calls(atkGetStock) - before
	series := atk22eSeries(t, reg)
	counted := series["resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=GetStock}"]
	state, _ := c.Runtime().BreakerState(atkGetStock)
	_, live := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	if seenDead != 0 {
		t.Errorf("the server saw %d of the calls whose deadline had passed, want 0", seenDead)
	}
	if got[codes.DeadlineExceeded] != 30 || counted != 0 || state != runtime.StateClosed || live != nil || fellBack.Load() != 0 {
		t.Errorf("README (Order of the layers): a call whose deadline passed is answered DEADLINE_EXCEEDED before any "+
			"layer, is not given to the fallback, and the breaker and the attempt metrics learn nothing of it. 30 calls whose deadline had passed "+
			"(their context's timer not yet run): codes %v, attempts_total{DEADLINE_EXCEEDED} = %v (want 0), "+
			"the fallback answered %d (want 0; ABORTED is its answer), breaker %v (want closed), the server saw %d of them; "+
			"the next live call: %v (want OK)",
			got, counted, fellBack.Load(), state, seenDead, live)
	}
}

// atk26aSlack is how long after its deadline an attempt may reach gRPC
// and still have been handed over in time: the runtime looks at the
// deadline, then admits and hands over the attempt, a few microseconds
// (1 to 4 measured) in which the deadline may pass. Before the runtime
// looked at the deadline itself, retries reached gRPC up to milliseconds
// late, the context's timer as late (over half of them by more than this).
const atk26aSlack = 100 * time.Microsecond

// atk26aAttempt is the per-call counter of attempts atk26aCount reads
// from a call's context.
type atk26aAttempt struct{}

// TestAttack26ARetryPastItsDeadlineIsNotSent: the server fails every
// GetStock with UNAVAILABLE and a pushback of 2 ms; 200 callers give
// their call 2 ms plus 0 to 780 µs, GOMAXPROCS as it is, so that for many
// the deadline passes while the pause ends. An interceptor on the
// connection sees each attempt as the runtime hands it to gRPC: one whose
// deadline has passed is refused by gRPC, unsent. It counts a retry that
// reaches gRPC more than atk26aSlack after its deadline. The promise (Deadlines):
// such a retry is not sent nor counted as made, and its caller gets the
// last real error, UNAVAILABLE. Today (60 and 77 of 200 in a run, with
// metrics and without) the runtime hands it to gRPC, its caller gets
// gRPC's DEADLINE_EXCEEDED, and retries_total{outcome="made"} counts it.
// TestAttack24bRetryOverBeforeItWentIsNotMade counted such an attempt as
// one the deadline cut (attempts_total{code="DEADLINE_EXCEEDED"}): it was
// never sent.
func TestAttack26ARetryPastItsDeadlineIsNotSent(t *testing.T) {
	for _, withMetrics := range []bool{true, false} {
		name := "without metrics or breaker"
		if withMetrics {
			name = "with metrics"
		}
		t.Run(name, func(t *testing.T) {
			atkNoLeak(t)
			var handed, pastDeadline atomic.Int32
			count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if n, ok := ctx.Value(atk26aAttempt{}).(*atomic.Int32); ok {
					handed.Add(1)
					if dl, ok := ctx.Deadline(); ok && n.Add(1) > 1 && time.Until(dl) < -atk26aSlack {
						pastDeadline.Add(1)
						n.Store(-1000) // this call's retry was made after its deadline
					}
				}
				return inv(ctx, method, req, reply, cc, opts...)
			}
			fs, cc := startFault(t, atkPushback("2"), grpc.WithUnaryInterceptor(count))
			reg := prometheus.NewRegistry()
			var o inventoryv1.InventoryServiceResilientOptions
			if withMetrics {
				o.Runtime = []runtime.Option{runtime.WithRegisterer(reg)}
			}
			c := atkInventory(t, cc, o, func(p *policy.Service) {
				m := attack23mBare(p)
				m.Timeout = 3 * time.Second
				m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
			})
			const calls = 200
			wrong := map[codes.Code]int{}
			for i := range calls {
				var n atomic.Int32
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), atk26aAttempt{}, &n),
					2*time.Millisecond+time.Duration(i%40)*20*time.Microsecond)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if n.Load() < 0 && status.Code(err) != codes.Unavailable {
					wrong[status.Code(err)]++
				}
			}
			past := int(pastDeadline.Load())
			seen := fs.Calls(atkGetStock)
			bad := 0
			for _, n := range wrong {
				bad += n
			}
			made := atk22eSeries(t, reg)["resilient_client_retries_total{method=GetStock,outcome=made}"]
			// retries_total{made} counts the retries handed to gRPC in time.
			wantMade := int(handed.Load()) - calls - past
			if !withMetrics {
				wantMade = 0 // no metrics: nothing counted
			}
			// A retry whose deadline passes in the microseconds between the
			// runtime's last look and gRPC's is counted as made and then
			// refused by gRPC: no check can close that gap, so a few of
			// 200 (seen: 1) may differ; the calls late by over atk26aSlack
			// are what the promise is about.
			if bad != 0 || max(int(made)-wantMade, wantMade-int(made)) > 4 {
				t.Errorf("README (Deadlines): when the deadline passes between the end of the wait and the retry, the "+
					"retry is not sent nor counted as made, and the last real error is returned. Of %d calls, %d had their "+
					"retry handed to gRPC over 100µs after the deadline (%d attempts handed over, %d seen by the server); %d of those "+
					"callers got %v instead of UNAVAILABLE; retries_total{made} = %v, want %d, the retries handed over in time "+
					"(metrics: %v; retries the server saw: %d)",
					calls, past, handed.Load(), seen, bad, wrong, made, wantMade, withMetrics, seen-calls)
			}
			t.Logf("%d of %d retries handed over after their deadline", past, calls)
		})
	}
}

// TestAttack26AHedgedCopyPastItsDeadlineIsNotSent: the hedged GetStock
// (UNAVAILABLE non-fatal, 2 copies) of a server that fails every copy
// with UNAVAILABLE and a pushback of 2 ms, which delays the next copy by
// 2 ms; 200 callers give their call 2 ms plus 0 to 780 µs. A second copy
// that reaches gRPC over atk26aSlack after its deadline is refused by
// gRPC, unsent. Deadlines: no wait for the server's pushback runs past
// the deadline, the last real error is returned, as hedged does itself
// when the deadline passes in the wait with every copy failed ("the last
// real error is the answer"); Hedging: "as a retried call does". Today
// (40 and 38 of 200 in two runs) the copy is handed to gRPC after its
// deadline and its caller gets gRPC's DEADLINE_EXCEEDED, the first copy's
// UNAVAILABLE lost.
func TestAttack26AHedgedCopyPastItsDeadlineIsNotSent(t *testing.T) {
	atkNoLeak(t)
	var past atomic.Int32
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if n, ok := ctx.Value(atk26aAttempt{}).(*atomic.Int32); ok {
			if dl, ok := ctx.Deadline(); ok && n.Add(1) > 1 && time.Until(dl) < -atk26aSlack {
				past.Add(1)
				n.Store(-1000)
			}
		}
		return inv(ctx, method, req, reply, cc, opts...)
	}
	fs, cc := startFault(t, atkPushback("2"), grpc.WithUnaryInterceptor(count))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		attack23mHedged(p).Hedging.NonFatalCodes = policy.CodesOf(codes.Unavailable)
	})
	const calls = 200
	wrong := map[codes.Code]int{}
	bad := 0
	for i := range calls {
		var n atomic.Int32
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), atk26aAttempt{}, &n),
			2*time.Millisecond+time.Duration(i%40)*20*time.Microsecond)
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		cancel()
		if n.Load() < 0 && status.Code(err) != codes.Unavailable {
			wrong[status.Code(err)]++
			bad++
		}
	}
	if bad != 0 {
		t.Errorf("README (Deadlines, Hedging): a wait for the server's pushback that ends past the deadline returns the "+
			"last real error, as a retried call does. Of %d hedged calls, %d had their second copy handed to gRPC over "+
			"100µs after the deadline (the server saw %d copies in all); %d of those callers got %v instead of UNAVAILABLE",
			calls, past.Load(), fs.Calls(atkGetStock), bad, wrong)
	}
}
