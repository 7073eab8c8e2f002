package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

type panicKey struct{}

// TestAttackFaultAdaptiveTokensComeBackFromEveryEnding: against a real
// server on loopback, a limit pinned at 2 (min = max, so that only its
// accounting is judged) must have both places free again after every way
// an attempt ends that says nothing of the dependency: the caller cancels
// it in flight, it loses a hedge, an interceptor panics, and while streams
// of the same service are open (streams take no token). Then two calls
// held by the server both reach it, and a third is refused at once.
func TestAttackFaultAdaptiveTokensComeBackFromEveryEnding(t *testing.T) {
	gate := make(chan struct{})
	var gateOnce sync.Once
	open := func() { gateOnce.Do(func() { close(gate) }) }
	defer open()
	held := func(ctx context.Context, _ server.Call) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	panicky := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if ctx.Value(panicKey{}) != nil {
			panic("interceptor panics")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	srv, cc := startFault(t, server.Hang, panicky)
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute} // hedges are not what is judged
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 2, InitialLimit: 2, MaxLimit: 2}
		for i := range p.Methods {
			switch p.Methods[i].Name {
			case getStock:
				p.Methods[i].Timeout, p.Methods[i].Retry = 2*time.Second, nil
				p.Methods[i].Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 2}
			case reserveStock: // the check at the end: one attempt per call
				p.Methods[i].Timeout, p.Methods[i].Retry = 2*time.Second, nil
			}
		}
	})

	// The caller cancels attempts in flight on a hung server.
	for range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := getStockOf(ctx, c)
		cancel()
		if err == nil {
			t.Fatal("a call on a hung server answered")
		}
		// The copies of a call the caller ended hold their places until
		// gRPC has unwound them, just after the call returned: a call made
		// at once may find them still held (ErrConcurrencyLimited); that
		// is not a leak, the check below is.
		time.Sleep(5 * time.Millisecond)
	}
	// Hedged losers: the first copy hangs, the second answers.
	srv.SetBehaviour(func(ctx context.Context, call server.Call) error {
		if call.N%2 == 1 {
			return server.Hang(ctx, call)
		}
		return nil
	})
	for range 6 {
		if _, err := getStockOf(context.Background(), c); err != nil {
			t.Fatalf("hedged call (server saw %d): %v", srv.Calls(getStock), err)
		}
	}
	// Panics in the call.
	for range 6 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			_, _ = getStockOf(context.WithValue(context.Background(), panicKey{}, 1), c)
		}()
	}
	// Streams of the same service, open throughout the check below.
	srv.SetBehaviour(held)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	for range 3 {
		st, err := c.WatchStock(sctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		_ = st
	}
	time.Sleep(50 * time.Millisecond) // the hedges' losers unwind
	reserve := func() error {
		_, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "o1", Sku: "apple", Units: 1})
		return err
	}
	before := srv.Calls(reserveStock)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() { errs <- reserve() })
	}
	deadline := time.Now().Add(2 * time.Second)
	for srv.Calls(reserveStock)-before < 2 && time.Now().Before(deadline) {
		select {
		case err := <-errs:
			t.Fatalf("a call held by the server ended early: %v (tokens leaked?)", err)
		case <-time.After(time.Millisecond):
		}
	}
	if n := srv.Calls(reserveStock) - before; n < 2 {
		t.Fatalf("only %d of 2 calls reached the server under a limit of 2", n)
	}
	if err := reserve(); !errors.Is(err, runtime.ErrConcurrencyLimited) {
		t.Fatalf("a third call under a limit of 2 with 2 in flight: %v, want ErrConcurrencyLimited", err)
	}
	open()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
	scancel()
}

// TestAttackFaultThrottlerNotFoundIsAnAcceptAndRefusalsReachTheFallback:
// against a real server, a dependency answering NOT_FOUND (an answer) is
// refused nothing: every call reaches it. When it answers UNAVAILABLE, the
// throttler's refusals reach the fallback, and never more than max_refusal
// of the attempts are refused: some always reach the server.
func TestAttackFaultThrottlerNotFoundIsAnAcceptAndRefusalsReachTheFallback(t *testing.T) {
	srv, cc := startFault(t, server.Fail(codes.NotFound))
	// Connected first: at load 8 the first call's attempt timed out (the
	// annotated 300 ms) while the connection was dialled.
	readyConn(t, cc)
	var fellBack, throttled atomic.Int64
	o := inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(withoutCacheAndRateLimit), runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker = nil
			p.ClientThrottle = &policy.Throttle{Window: time.Minute, MaxRefusal: 0.5}
			for i := range p.Methods {
				if p.Methods[i].Name == getStock {
					p.Methods[i].Retry, p.Methods[i].Hedging = nil, nil
				}
			}
		})},
		GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			if errors.Is(err, runtime.ErrThrottled) {
				throttled.Add(1)
			}
			return nil, err
		},
	}
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, o)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for range n {
		if _, err := getStockOf(context.Background(), c); status.Code(err) != codes.NotFound {
			t.Fatalf("NOT_FOUND dependency: %v", err)
		}
	}
	if got := srv.Calls(getStock); got != n || throttled.Load() != 0 {
		t.Fatalf("a dependency answering NOT_FOUND: %d of %d calls reached it, %d throttled", got, n, throttled.Load())
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	fellBack.Store(0)
	for range 3 * n { // the window of a minute forgets nothing: 300 accepts, then 900 refusals
		if _, err := getStockOf(context.Background(), c); status.Code(err) != codes.Unavailable {
			t.Fatalf("UNAVAILABLE dependency: %v", err)
		}
	}
	sent := srv.Calls(getStock) - n
	if throttled.Load() == 0 || fellBack.Load() != 3*n || int64(sent)+throttled.Load() != 3*n {
		t.Fatalf("outage: %d sent, %d throttled, %d fell back, of %d", sent, throttled.Load(), fellBack.Load(), 3*n)
	}
	if sent < 3*n*4/10 {
		t.Fatalf("outage: only %d of %d attempts reached the server under max_refusal 0.5", sent, 3*n)
	}
	// A caller that gives up is answered with its own end, not the fallback.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fellBack.Store(0)
	for range 50 {
		if _, err := getStockOf(ctx, c); status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled caller: %v", err)
		}
	}
	if fellBack.Load() != 0 {
		t.Fatalf("the fallback answered %d cancelled callers", fellBack.Load())
	}
}
