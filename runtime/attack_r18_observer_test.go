package runtime_test

// Attacks with a panicking observer: the observer (WithObserver) is the
// user's code, an OpenTelemetry bridge or a test hook, and it runs on the
// call's goroutine at a breaker's transition. A panic there goes on to the
// caller, as a panic in an interceptor does; it must not keep what the call
// or stream had taken (a bulkhead permit, a place under the adaptive limit),
// or every later call finds them gone.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18PanicsOnHalfOpen is an observer that panics at a transition to
// half-open while armed.
func r18PanicsOnHalfOpen(armed *atomic.Bool) runtime.Option {
	return runtime.WithObserver(func(e runtime.Event) {
		if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateHalfOpen && armed.Load() {
			panic("observer panics at half-open")
		}
	})
}

// r18OpenThenCool opens the service's breaker with two failing GetStock
// calls and lets its cool-down pass on clock: the next admission moves it
// to half-open, on the caller's goroutine.
func r18OpenThenCool(t *testing.T, c *inventoryv1.InventoryServiceResilientClient, clock *fakeClock) {
	t.Helper()
	for range 2 {
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("a failing call: %v, want UNAVAILABLE", err)
		}
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "after 2 failures of 2 calls the breaker is %v, want open")
	clock.Advance(3 * time.Second) // the cool-down is 2s
}

// r18Panicked runs f and returns what it panicked with, nil if it did not.
func r18Panicked(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// A stream opened as the breaker's cool-down ends moves it to half-open;
// the observer panics there. The panic reaches the caller, and the
// stream's permit, taken before the breaker was asked, goes back.
func TestAttackR18PanickingObserverAtAStreamsAdmissionKeepsNoPermit(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clock := newAtkClock()
	var armed atomic.Bool
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clock), r18PanicsOnHalfOpen(&armed)},
	}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 2
		atkMethod(p, atkGetStock).Retry = nil
	})
	r18OpenThenCool(t, c, clock)

	armed.Store(true)
	p := r18Panicked(func() {
		_, _ = c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
	})
	armed.Store(false)
	if p == nil {
		t.Fatal("the observer's panic did not reach the caller")
	}
	atkWantNoPermits(t, c.Runtime(), atkWatchStock, "of WatchStock kept by a stream whose opening panicked in the observer")
	if n := fs.Calls(atkWatchStock); n != 0 {
		t.Errorf("the server saw %d streams opened, want 0: the panic came before the stream was opened", n)
	}

	// Every permit is still there: 4 streams open at once, as many as the
	// method's bulkhead has.
	fs.SetBehaviour(server.Healthy)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 4 {
		if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
			t.Fatalf("stream %d of 4 on a bulkhead of 4: %v", i+1, err)
		}
	}
	cancel()
	atkWaitFor(t, "the 4 cancelled streams give their permits back", func() bool { return atkInUse(t, c.Runtime(), atkWatchStock) == 0 })
}

// A unary call under an adaptive limit of 1 moves the breaker to
// half-open; the observer panics there. The place the call took under the
// limit (before the breaker is asked) goes back: otherwise the limit of 1
// is held by nobody and every later attempt is refused
// ErrConcurrencyLimited, for good.
func TestAttackR18PanickingObserverAtAUnaryAdmissionKeepsNoPlaceUnderTheLimit(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clock := newAtkClock()
	var armed atomic.Bool
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clock), r18PanicsOnHalfOpen(&armed)},
	}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 2
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, InitialLimit: 1, MaxLimit: 1}
		atkMethod(p, atkGetStock).Retry = nil
	})
	r18OpenThenCool(t, c, clock)

	armed.Store(true)
	before := fs.Calls(atkGetStock)
	p := r18Panicked(func() { _, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}) })
	armed.Store(false)
	if p == nil {
		t.Fatal("the observer's panic did not reach the caller")
	}
	if n := fs.Calls(atkGetStock) - before; n != 0 {
		t.Errorf("the server saw %d calls, want 0: the panic came before the attempt was sent", n)
	}

	fs.SetBehaviour(server.Healthy)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	if errors.Is(err, runtime.ErrConcurrencyLimited) {
		t.Fatalf("the next call: %v: the panicked call's place under the limit of 1 was never given back", err)
	}
	if err != nil {
		t.Fatalf("the next call, a half-open probe to a healthy server: %v", err)
	}
	if n := fs.Calls(atkGetStock) - before; n != 1 {
		t.Errorf("the server saw %d calls, want 1 (the probe)", n)
	}
}

// A stream that ends in an error which opens the breaker: the observer
// panics at the transition to open, inside the stream's ending. The panic
// reaches the caller of Recv, and the permit goes back all the same, at
// once: the ending runs once, so a permit it failed to give back would
// never come back, not even at the end of the stream's context.
func TestAttackR18PanickingObserverAtAStreamsEndingKeepsNoPermit(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	var armed atomic.Bool
	armed.Store(true)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithObserver(func(e runtime.Event) {
			if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen && armed.Load() {
				panic("observer panics at open")
			}
		})},
	}, func(p *policy.Service) { p.Breaker.MinimumCalls = 1 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err != nil {
		t.Fatalf("opening the stream: %v", err)
	}
	p := r18Panicked(func() { _, _ = st.Recv() })
	armed.Store(false)
	if p == nil {
		t.Fatal("the observer's panic did not reach the caller of Recv")
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "the failed stream left the breaker %v, want open")
	atkWantNoPermits(t, c.Runtime(), atkWatchStock, "of WatchStock kept by a stream whose ending panicked in the observer")
	cancel()
	atkWaitFor(t, "the permit is back once the stream's context ended", func() bool { return atkInUse(t, c.Runtime(), atkWatchStock) == 0 })
	if n := fs.Calls(atkWatchStock); n != 1 {
		t.Errorf("the server saw %d streams, want 1", n)
	}
}
