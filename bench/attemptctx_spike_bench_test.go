package bench

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

// The spike's benchmarks. Each case is one attempt's context made and
// ended around one call, three ways:
//
//   - timeout: context.WithTimeout + cancel (StackFloor's floor);
//   - deadline: time.Now, then context.WithDeadline(now+d) + cancel, which
//     is what the runtime's attemptContext does today (it keeps the reading
//     as the attempt's start);
//   - spike: time.Now, then newAttemptCtx(now, d) + release, the reading
//     kept the same way;
//   - hybrid: the spike's context under a caller's context that never ends
//     (Done nil), context.WithDeadline under one that can (where the spike
//     must follow it through context.AfterFunc, which costs more than the
//     stdlib's own children map).
//
// The cases: around the no-op call (noop); with the child grpc-go makes
// per call, context.WithCancel, its Done, Deadline, Err and a Value, and
// both cancelled (child); each again under a caller's context.WithCancel
// that lives across the calls (…-cparent).

var spikeImpls = []string{"timeout", "deadline", "spike", "hybrid"}

type spikeKey struct{}

// spikeOp returns one attempt of impl around call.
func spikeOp(impl string, call func(context.Context) error) func(context.Context) error {
	const d = time.Second
	switch impl {
	case "timeout":
		return func(parent context.Context) error {
			ctx, cancel := context.WithTimeout(parent, d)
			defer cancel()
			return call(ctx)
		}
	case "deadline":
		return func(parent context.Context) error {
			now := time.Now()
			ctx, cancel := context.WithDeadline(parent, now.Add(d))
			defer cancel()
			spikeStart = now
			return call(ctx)
		}
	case "spike":
		return func(parent context.Context) error {
			now := time.Now()
			c := newAttemptCtx(parent, now, d)
			defer c.release()
			spikeStart = now
			return call(c)
		}
	case "hybrid":
		return func(parent context.Context) error {
			now := time.Now()
			spikeStart = now
			if parent.Done() == nil {
				c := newAttemptCtx(parent, now, d)
				defer c.release()
				return call(c)
			}
			ctx, cancel := context.WithDeadline(parent, now.Add(d))
			defer cancel()
			return call(ctx)
		}
	}
	panic("unknown impl " + impl)
}

// spikeStart keeps the attempt's start reading alive, as the runtime keeps it.
var spikeStart time.Time

func noopCall(ctx context.Context) error { _, err := noop(ctx, request); return err }

// childCall is what grpc-go does to the attempt's context on a unary call,
// at the least: a child by context.WithCancel, its Done (the transport
// caches it), its Deadline (the grpc-timeout header), Err and a Value (the
// metadata), then the child's cancel.
func childCall(ctx context.Context) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	spikeDone = cctx.Done()
	if _, ok := cctx.Deadline(); !ok {
		panic("no deadline")
	}
	if cctx.Value(spikeKey{}) != nil {
		panic("value")
	}
	return cctx.Err()
}

var spikeDone <-chan struct{}

var spikeCases = []struct {
	name        string
	call        func(context.Context) error
	cancellable bool // the caller's context is a context.WithCancel
}{
	{"noop", noopCall, false},
	{"child", childCall, false},
	{"noop-cparent", noopCall, true},
	{"child-cparent", childCall, true},
}

// spikeParent returns the caller's context of a case, ended at cleanup.
func spikeParent(tb testing.TB, cancellable bool) context.Context {
	if !cancellable {
		return context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	return ctx
}

// BenchmarkAttemptCtx runs each case and impl in a plain loop, for ns/op
// and the allocations (-benchmem).
func BenchmarkAttemptCtx(b *testing.B) {
	for _, cs := range spikeCases {
		for _, impl := range spikeImpls {
			b.Run("case="+cs.name+"/impl="+impl, func(b *testing.B) {
				op := spikeOp(impl, cs.call)
				parent := spikeParent(b, cs.cancellable)
				b.ReportAllocs()
				for b.Loop() {
					if err := op(parent); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAttemptCtxFloor runs the three impls of each case in turns, in
// batches (floorTurns), and reports the quickest tenth of each one's
// batches, and the spike's saving against deadline (the runtime's path
// today) and against timeout.
func BenchmarkAttemptCtxFloor(b *testing.B) {
	for _, cs := range spikeCases {
		b.Run("case="+cs.name, func(b *testing.B) {
			parent := spikeParent(b, cs.cancellable)
			calls := make([]func(context.Context) error, len(spikeImpls))
			for i, impl := range spikeImpls {
				op := spikeOp(impl, cs.call)
				calls[i] = func(context.Context) error { return op(parent) }
			}
			p10 := floorTurns(b, context.Background(), calls)
			for i, impl := range spikeImpls {
				b.ReportMetric(p10[i], impl+"-p10-ns/call")
			}
			b.ReportMetric(p10[1]-p10[2], "saving-vs-deadline-ns/call")
			b.ReportMetric(p10[0]-p10[2], "saving-vs-timeout-ns/call")
			b.ReportMetric(p10[1]-p10[3], "hybrid-saving-vs-deadline-ns/call")
		})
	}
}

// BenchmarkAttemptCtxStack runs StackFloor's three stacks and the noop
// case's deadline and spike attempts in turns, and estimates what the
// full stack would cost with the spike's context in place of
// WithDeadline: the stack less the measured saving, and failsafe-go's
// figure over it. An estimate: the runtime is not changed.
func BenchmarkAttemptCtxStack(b *testing.B) {
	var calls []func(context.Context) error
	for _, impl := range stackImpls { // resilient, failsafe, context
		c := stackCall(b, impl)
		calls = append(calls, func(ctx context.Context) error { _, err := c(ctx); return err })
	}
	calls = append(calls, spikeOp("deadline", noopCall), spikeOp("spike", noopCall))
	p := floorTurns(b, context.Background(), calls)
	resilient, failsafe, bare, deadline, spike := p[0], p[1], p[2], p[3], p[4]
	est := resilient - (deadline - spike)
	b.ReportMetric(resilient, "resilient-p10-ns/call")
	b.ReportMetric(failsafe, "failsafe-p10-ns/call")
	b.ReportMetric(bare, "context-p10-ns/call")
	b.ReportMetric(deadline, "deadline-p10-ns/call")
	b.ReportMetric(spike, "spike-p10-ns/call")
	b.ReportMetric(est, "est-resilient-p10-ns/call")
	b.ReportMetric(failsafe/resilient, "x-failsafe-now")
	b.ReportMetric(failsafe/est, "x-failsafe-est")
	b.ReportMetric(failsafe/bare, "x-failsafe-context")
	b.ReportMetric(est-bare, "est-over-context-ns/call")
}

// BenchmarkAttemptCtxGRPC is a real unary call over loopback to the example
// server, the plain generated client, inside each impl's attempt context,
// the caller's context Background or a context.WithCancel; impls in turns
// (floorTurns, batches of 200 calls), and each in a plain loop for the
// allocations.
func BenchmarkAttemptCtxGRPC(b *testing.B) {
	srv, err := server.Start("127.0.0.1:0", server.Healthy)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	client := inventoryv1.NewInventoryServiceClient(cc)
	if _, err := client.GetStock(context.Background(), request); err != nil {
		b.Fatal(err)
	}
	call := func(ctx context.Context) error { _, err := client.GetStock(ctx, request); return err }
	for _, cancellable := range []bool{false, true} {
		name := "parent=background"
		if cancellable {
			name = "parent=cancel"
		}
		b.Run(name+"/turns", func(b *testing.B) {
			parent := spikeParent(b, cancellable)
			calls := make([]func(context.Context) error, len(spikeImpls))
			for i, impl := range spikeImpls {
				op := spikeOp(impl, call)
				calls[i] = func(context.Context) error { return op(parent) }
			}
			p10 := floorTurns(b, context.Background(), calls)
			for i, impl := range spikeImpls {
				b.ReportMetric(p10[i], impl+"-p10-ns/call")
			}
			b.ReportMetric(p10[1]-p10[2], "saving-vs-deadline-ns/call")
			b.ReportMetric(p10[1]-p10[3], "hybrid-saving-vs-deadline-ns/call")
		})
		for _, impl := range spikeImpls {
			b.Run(name+"/impl="+impl, func(b *testing.B) {
				op := spikeOp(impl, call)
				parent := spikeParent(b, cancellable)
				b.ReportAllocs()
				for b.Loop() {
					if err := op(parent); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAttemptCtxParts takes apart the spike's noop case, in turns:
// the call with only the clock reading (now), with a time.AfterFunc timer
// set and stopped as well (timer: the spike's context less its struct,
// mutex and atomics), the spike's context, and the runtime's path today
// (deadline).
func BenchmarkAttemptCtxParts(b *testing.B) {
	const d = time.Second
	var f = func() {}
	calls := []func(context.Context) error{
		func(ctx context.Context) error { spikeStart = time.Now(); return noopCall(ctx) },
		func(ctx context.Context) error {
			spikeStart = time.Now()
			t := time.AfterFunc(d, f)
			defer t.Stop()
			return noopCall(ctx)
		},
		spikeOp("spike", noopCall),
		spikeOp("deadline", noopCall),
	}
	names := []string{"now", "timer", "spike", "deadline"}
	for i, p10 := range floorTurns(b, context.Background(), calls) {
		b.ReportMetric(p10, names[i]+"-p10-ns/call")
	}
}
