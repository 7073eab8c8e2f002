package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func hedging(delay time.Duration, copies int) *policy.Hedging {
	return &policy.Hedging{Delay: delay, MaxCopies: copies, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
}

// TestHedgeFirstAnswerWinsAndTheOtherIsCancelled: the first copy hangs,
// the second answers; the caller gets the answer soon after the delay and
// the server sees the first copy cancelled.
func TestHedgeFirstAnswerWinsAndTheOtherIsCancelled(t *testing.T) {
	srv, cc := start(t, func(ctx context.Context, c server.Call) error {
		if c.N == 1 {
			return server.Hang(ctx, c)
		}
		return nil
	})
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: 2 * time.Second, Hedging: hedging(50*time.Millisecond, 2)},
	}})
	begin := time.Now()
	resp, err := callGetStock(context.Background(), rt, cc)
	took := time.Since(begin)
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("%v %v, want the second copy's answer", resp, err)
	}
	// The first copy hangs until its 2 s timeout: an answer well before it
	// is the hedge's. The upper bound leaves a loaded machine its latency.
	if took < 50*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("took %v, want about the 50ms delay, far below the first copy's 2s timeout", took)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2 copies", got)
	}
	eventually(t, "server saw the losing copy cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
	if s, _ := rt.BreakerState(getStock); s != runtime.StateClosed {
		t.Errorf("breaker %v", s)
	}
}

// TestHedgeFastAnswerSendsNoCopy: an answer before the delay sends nothing
// more. The delay is far above a loopback answer's time on a loaded
// machine under -race (at load 20 one answer outlasted a 100 ms delay) and
// never waited for; each call is checked to have answered before it.
func TestHedgeFastAnswerSendsNoCopy(t *testing.T) {
	const delay = 5 * time.Second
	srv, cc := start(t, server.Healthy)
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Hedging: hedging(delay, 3)},
	}})
	for i := range 20 {
		begin := time.Now()
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatal(err)
		}
		// Begun before the call, took bounds the call's own time from above.
		if took := time.Since(begin); took >= delay {
			t.Errorf("call %d answered after %v, not before the %v delay", i+1, took, delay)
		}
		if got := srv.Calls(getStock); got != i+1 {
			t.Errorf("server saw %d calls after %d fast answers, want %d", got, i+1, i+1)
		}
	}
}

// TestHedgeFatalAnswerEndsTheCall: NOT_FOUND from any copy is the answer,
// and ends the call without waiting for the others. The second copy's
// answer has a whole delay (200 ms) to come back before a third would be
// sent (30 ms was not enough at load 16).
func TestHedgeFatalAnswerEndsTheCall(t *testing.T) {
	srv, cc := start(t, func(ctx context.Context, c server.Call) error {
		if c.N == 1 {
			return server.Hang(ctx, c)
		}
		return status.Error(codes.NotFound, "no such sku")
	})
	readyConn(t, cc)
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Hedging: hedging(200*time.Millisecond, 3)},
	}})
	_, err := callGetStock(context.Background(), rt, cc)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("%v, want the second copy's NOT_FOUND", err)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2: the answer ends the hedge", got)
	}
	eventually(t, "the hanging copy cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
}

// TestHedgeNonFatalFailureSendsTheNextCopyAtOnce: UNAVAILABLE leaves the
// hedge running and the next copy goes without waiting for the delay;
// when every copy failed so, the last error says the retries are spent.
func TestHedgeNonFatalFailureSendsTheNextCopyAtOnce(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Hedging: hedging(time.Second, 3)},
	}})
	begin := time.Now()
	_, err := callGetStock(context.Background(), rt, cc)
	if took := time.Since(begin); took > 300*time.Millisecond {
		t.Errorf("took %v: the copies after a non-fatal failure should not wait for the 1s delay", took)
	}
	if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
		t.Errorf("%v, want UNAVAILABLE matching ErrRetriesExhausted", err)
	}
	if got := srv.Calls(getStock); got != 3 {
		t.Errorf("server saw %d calls, want the 3 copies", got)
	}
}

// TestHedgeCopiesComeFromTheRetryBudget: with an empty budget, no copy is
// sent, however slow the first.
func TestHedgeCopiesComeFromTheRetryBudget(t *testing.T) {
	srv, cc := start(t, server.Slow(100*time.Millisecond))
	rt := inventory(t, policy.Service{
		Budget: &policy.Budget{Ratio: 0.01, MinRetries: 2, Window: time.Minute},
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Hedging: hedging(10*time.Millisecond, 2)},
		}})
	for range 10 {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatal(err)
		}
	}
	// 10 calls: the floor of 2 allows 2 copies, the ratio 0.01 none more.
	if got := srv.Calls(getStock); got != 12 {
		t.Errorf("server saw %d calls, want 10 + 2 budgeted copies", got)
	}
}

// TestHedgeStopsAtTheOpenBreaker: an open breaker refuses the first copy
// and no other is sent.
func TestHedgeStopsAtTheOpenBreaker(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	clock := newFakeClock()
	rt := inventory(t, policy.Service{
		Breaker: breakerPolicy(4, 1),
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Hedging: hedging(10*time.Millisecond, 4)}},
	}, runtime.WithClock(clock))
	// 4 copies of one call fail and open the breaker; the next call is
	// refused at once.
	_, _ = callGetStock(context.Background(), rt, cc)
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after 4 failed copies, want open", s)
	}
	calls := srv.Calls(getStock)
	_, err := callGetStock(context.Background(), rt, cc)
	if !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("%v, want ErrCircuitOpen", err)
	}
	if got := srv.Calls(getStock); got != calls {
		t.Errorf("server saw %d more calls through an open breaker", got-calls)
	}
}

// TestHedgeCopiesCarryTheSameIdempotencyKey: a generated key is the same
// on every copy.
func TestHedgeCopiesCarryTheSameIdempotencyKey(t *testing.T) {
	srv, cc := start(t, func(ctx context.Context, c server.Call) error {
		if c.N == 1 {
			return server.Hang(ctx, c)
		}
		return nil
	})
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, GenerateIdempotencyKey: true, Hedging: hedging(20*time.Millisecond, 2)},
	}})
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	keys := srv.Keys(getStock)
	if len(keys) != 2 || keys[0] != keys[1] || len(keys[0]) < 20 {
		t.Errorf("keys %q, want one generated key on both copies", keys)
	}
}

// tailServer answers after about 2ms, and 5 % of its calls, at random,
// after 1s: the long tail hedging is for.
func tailServer(ctx context.Context, _ server.Call) error {
	d := 2 * time.Millisecond
	if rand.IntN(100) < 5 {
		d = time.Second
	}
	return server.Wait(ctx, d)
}

// BenchmarkHedgingTail measures the latency of calls against tailServer
// with and without hedging, and the calls the server sees per call. Run it
// with a fixed count, as BENCHMARKS.md does:
//
//	go test -run '^$' -bench HedgingTail -benchtime 2000x ./runtime
func BenchmarkHedgingTail(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hedge *policy.Hedging
	}{
		{"hedging=none", nil},
		{"hedging=20ms", hedging(20*time.Millisecond, 2)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv, err := server.Start("127.0.0.1:0", tailServer)
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Stop()
			cc := dialBench(b, srv.Addr())
			rt, err := runtime.NewClient(&policy.Service{
				Name:   "example.inventory.v1.InventoryService",
				Budget: &policy.DefaultBudget,
				Methods: []policy.Method{
					{Name: getStock, Idempotent: true, Timeout: 2 * time.Second, Hedging: bc.hedge},
				}})
			if err != nil {
				b.Fatal(err)
			}
			plain := inventoryv1.NewInventoryServiceClient(cc)
			var mu sync.Mutex
			var took []time.Duration
			var n atomic.Int64
			b.SetParallelism(16) // many callers, as a service has
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					begin := time.Now()
					_, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
					d := time.Since(begin)
					if err != nil {
						b.Error(err)
					}
					n.Add(1)
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
				}
			})
			b.StopTimer()
			slices.Sort(took)
			q := func(p float64) float64 {
				return float64(took[min(len(took)-1, int(p*float64(len(took))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(srv.Calls(getStock))/float64(n.Load()), "server-calls/call")
		})
	}
}

func dialBench(b *testing.B, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return cc
}
