package runtime_test

// Attacks on what a stream holds when the server under it goes away
// (README, "Streams"): a server that restarts, or whose connections are
// reset, while streams are open and read. Each ending is an error from
// Recv, which gives the permit back at once and tells the breaker the
// stream's outcome; a breaker only streams go through is probed by them.

import (
	"context"
	"errors"
	"sync"
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

// attack21aWatchers builds the inventory client with WatchStock on a
// breaker of its own (streams alone go through it: they take its probes)
// that opens at 2 failures of 2, one probe, and a bulkhead of its own of
// 2 permits and no wait; a stream timeout long enough that only the
// server's fault ends a stream.
func attack21aWatchers(t *testing.T, srvAddr string, clock runtime.Clock, reg *prometheus.Registry) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	cc := dialFault(t, srvAddr)
	readyConn(t, cc)
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clock), runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) {
		w := atkMethod(p, atkWatchStock)
		w.Timeout = 30 * time.Second
		w.Bulkhead = &policy.Bulkhead{Permits: 2}
		w.Breaker = breakerPolicy(2, 1)
	})
}

// attack21aOpenWatchers opens n WatchStock streams and reads each on a
// goroutine of its own; the returned channel gives each Recv's first
// error (or nil for a message) with the permits held right after it
// returned.
type attack21aRecv struct {
	err     error
	permits int
}

func attack21aOpenWatchers(t *testing.T, c *inventoryv1.InventoryServiceResilientClient, n int, wg *sync.WaitGroup) <-chan attack21aRecv {
	t.Helper()
	out := make(chan attack21aRecv, n)
	for i := range n {
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err != nil {
			t.Fatalf("stream %d of %d: %v", i+1, n, err)
		}
		wg.Go(func() {
			_, err := st.Recv()
			out <- attack21aRecv{err: err, permits: atkInUse(t, c.Runtime(), atkWatchStock)}
		})
	}
	return out
}

// TestAttack21aStreamsThroughAServerRestart: two watchers read streams
// the server holds open without a message; the server goes down. Each
// Recv fails UNAVAILABLE, and the permit is back when Recv returns (at
// most the other watcher's still held); the two failures open the
// breaker, which refuses the next stream without a dial (the server saw
// no third); the server comes up, the cool-down passes, and one stream,
// the probe, answered, closes the breaker. Every stream's outcome is
// counted once.
func TestAttack21aStreamsThroughAServerRestart(t *testing.T) {
	atkNoLeak(t)
	srv, _ := startFault(t, server.Hang)
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	c := attack21aWatchers(t, srv.Addr(), clock, reg)
	rt := c.Runtime()

	var wg sync.WaitGroup
	recvs := attack21aOpenWatchers(t, c, 2, &wg)
	atkWaitFor(t, "two streams on the server", func() bool { return srv.InFlight() == 2 })
	if n := atkInUse(t, rt, atkWatchStock); n != 2 {
		t.Fatalf("%d permits taken by two open streams, want 2", n)
	}
	srv.Down()
	for range 2 {
		r := <-recvs
		if status.Code(r.err) != codes.Unavailable {
			t.Errorf("Recv on a server gone down: %v, want UNAVAILABLE", r.err)
		}
		if r.permits > 1 {
			t.Errorf("%d permits held right after a Recv returned the server's end, want at most the other stream's 1", r.permits)
		}
	}
	wg.Wait()
	atkWantNoPermits(t, rt, atkWatchStock, "after both streams ended with the server's restart")
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateOpen, "two streams failed by the restart left the breaker %v, want open")

	seen := srv.Calls(atkWatchStock)
	if _, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("a stream while the breaker is open: %v, want ErrCircuitOpen", err)
	}
	atkWantNoPermits(t, rt, atkWatchStock, "after a stream refused by the open breaker")

	srv.SetBehaviour(server.Healthy)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(11 * time.Second) // the cool-down is 10s
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// gRPC reconnects with its backoff: a probe that fails before the
	// connection is back would open the breaker again, so the probe waits
	// for the connection.
	var st inventoryv1.InventoryService_WatchStockClient
	st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}, waitForReady())
	if err != nil {
		t.Fatalf("the probe stream after the cool-down: %v", err)
	}
	if m, err := st.Recv(); err != nil || m.GetUnits() != 40 {
		t.Fatalf("the probe's first message: %v, %v", m, err)
	}
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateClosed, "the probe's first message left the breaker %v, want closed")
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	atkWantNoPermits(t, rt, atkWatchStock, "after the probe stream was read to its end")
	if n := srv.Calls(atkWatchStock) - seen; n != 1 {
		t.Errorf("the server saw %d streams after the breaker opened, want 1 (the probe)", n)
	}
	wantMetric(t, reg, 2, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "UNAVAILABLE")
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "OK")
	wantMetric(t, reg, 1, "resilient_client_breaker_rejections_total", "dependency", attack20bDep, "method", "WatchStock")
}

// TestAttack21aStreamsThroughConnectionResets: the server resets every
// connection (a TCP RST) under two open, read streams, three times over;
// the client reconnects each time. Each reset fails both streams'
// Recv with UNAVAILABLE and gives both permits back, never more than the
// bulkhead's 2 taken, and none left once the streams ended; the breaker
// is probed and closed again after each opening.
func TestAttack21aStreamsThroughConnectionResets(t *testing.T) {
	atkNoLeak(t)
	srv, _ := startFault(t, server.Hang)
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	c := attack21aWatchers(t, srv.Addr(), clock, reg)
	rt := c.Runtime()
	for round := range 3 {
		var wg sync.WaitGroup
		before := srv.Calls(atkWatchStock)
		recvs := attack21aOpenWatchers(t, c, 2, &wg)
		// Two streams held by the server: counted as running, not as
		// calls since the round began, which a previous round's cancelled
		// probe reaching the server late also adds to (seen at load 20).
		atkWaitFor(t, "two streams on the server", func() bool {
			return srv.Calls(atkWatchStock) >= before+2 && srv.InFlight() == 2
		})
		if _, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}); !errors.Is(err, runtime.ErrBulkheadFull) {
			t.Fatalf("round %d: a third stream on a bulkhead of 2: %v, want ErrBulkheadFull", round, err)
		}
		if n := srv.ResetConnections(); n < 1 {
			t.Fatalf("round %d: reset %d connections", round, n)
		}
		for range 2 {
			if r := <-recvs; status.Code(r.err) != codes.Unavailable {
				t.Errorf("round %d: Recv on a reset connection: %v, want UNAVAILABLE", round, r.err)
			}
		}
		wg.Wait()
		atkWantNoPermits(t, rt, atkWatchStock, "after a reset ended both streams")
		atkWantBreaker(t, rt, atkWatchStock, runtime.StateOpen, "two streams failed by a reset left the breaker %v, want open")
		// The cool-down passes; a probe on the reconnected connection
		// (the server holds it open) answers nothing, so it is cancelled:
		// it frees its place, and a second probe after it is let through.
		clock.Advance(11 * time.Second)
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}, waitForReady())
			if err != nil {
				cancel()
				t.Fatalf("round %d: a probe after the cool-down: %v", round, err)
			}
			cancel()
			_, _ = st.Recv()
		}
		atkWaitFor(t, "the cancelled probes' permits back", func() bool { return atkInUse(t, rt, atkWatchStock) == 0 })
		// Close the breaker for the next round: a healthy probe.
		srv.SetBehaviour(server.Healthy)
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}, waitForReady())
		if err != nil {
			t.Fatalf("round %d: the healthy probe: %v", round, err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
		atkWantBreaker(t, rt, atkWatchStock, runtime.StateClosed, "a healthy probe left the breaker %v, want closed")
		srv.SetBehaviour(server.Hang)
	}
	atkWantNoPermits(t, rt, atkWatchStock, "at the end")
	wantMetric(t, reg, 6, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "UNAVAILABLE")
	wantMetric(t, reg, 6, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "CANCELLED")
	wantMetric(t, reg, 3, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "OK")
}

// attack21aCloseSendPanics is a client stream whose CloseSend panics while
// armed, as an interceptor's wrapped stream (or a tracing library's) may.
type attack21aCloseSendPanics struct {
	grpc.ClientStream
	armed *atomic.Bool
	fails bool // CloseSend returns an error instead of panicking
}

func (s *attack21aCloseSendPanics) CloseSend() error {
	if s.armed.Load() {
		if s.fails {
			return status.Error(codes.Internal, "attack21a: CloseSend failed")
		}
		panic("attack21a: CloseSend panicked")
	}
	return s.ClientStream.CloseSend()
}

// attack21aCloseSendClient is the inventory client over an interceptor
// whose streams' CloseSend panics (or fails, with fails) while armed,
// WatchStock on a bulkhead of one permit and a minute's timeout.
func attack21aCloseSendClient(t *testing.T, armed *atomic.Bool, fails bool) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	_, cc := startFault(t, server.Hang, grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &attack21aCloseSendPanics{ClientStream: cs, armed: armed, fails: fails}, nil
	}))
	readyConn(t, cc)
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		w := atkMethod(p, atkWatchStock)
		w.Timeout = time.Minute
		w.Bulkhead = &policy.Bulkhead{Permits: 1}
	})
}

// TestAttack21aPanicInCloseSendGivesThePermitBack: the README says a
// stream gives its permit back at once on "a panic in the stream's calls
// (an interceptor, a codec); the panic goes on to the caller". The
// generated WatchStock calls CloseSend on the stream after sending the
// request, before it returns the stream: a CloseSend that panics there
// leaves the caller with a panic and no stream to cancel or read. The
// permit must be back when the panic reaches the caller. The runtime
// wrapped SendMsg, RecvMsg and Header but not CloseSend, so the permit
// stayed taken until the stream's timeout (a minute here; for good for a
// method without one), and the next stream on a bulkhead of one was
// refused.
func TestAttack21aPanicInCloseSendGivesThePermitBack(t *testing.T) {
	atkNoLeak(t)
	var armed atomic.Bool
	c := attack21aCloseSendClient(t, &armed, false)
	rt := c.Runtime()
	armed.Store(true)
	p := r18Panicked(func() { _, _ = c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}) })
	armed.Store(false)
	if p == nil {
		t.Fatal("CloseSend's panic did not reach the caller")
	}
	if n := atkInUse(t, rt, atkWatchStock); n != 0 {
		t.Errorf("%d permits of 1 held once CloseSend's panic reached the caller, who has no stream to cancel", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
		t.Errorf("the next stream on the bulkhead of 1: %v", err)
	}
}

// TestAttack21aFailedCloseSendGivesThePermitBack: the same with a
// CloseSend that returns an error: the generated WatchStock returns (nil,
// err), and the caller again has no stream. As for a request that does
// not marshal ("a server stream whose request fails so is never returned
// to the caller"), the permit must be back when the error is returned.
func TestAttack21aFailedCloseSendGivesThePermitBack(t *testing.T) {
	atkNoLeak(t)
	var armed atomic.Bool
	c := attack21aCloseSendClient(t, &armed, true)
	rt := c.Runtime()
	armed.Store(true)
	if st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}); err == nil || st != nil {
		t.Fatalf("WatchStock with a failing CloseSend: %v, %v, want no stream and the error", st, err)
	}
	armed.Store(false)
	if n := atkInUse(t, rt, atkWatchStock); n != 0 {
		t.Errorf("%d permits of 1 held once WatchStock returned CloseSend's error without a stream", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
		t.Errorf("the next stream on the bulkhead of 1: %v", err)
	}
}
