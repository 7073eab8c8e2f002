package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20CancelledStreamPermitIsBackWhenCancelReturns: the README
// says a stream gives its permit back "at once" at the end of its
// context. A watcher that cancels its stream and opens the next one at
// once (a reconnect) under a bulkhead of 1 permit and no max_wait must
// find the permit free: cancel has returned, the stream is over.
func TestAttack20CancelledStreamPermitIsBackWhenCancelReturns(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkWatchStock)
		m.Timeout = 5 * time.Second
		m.Bulkhead.Permits, m.Bulkhead.MaxWait = 1, 0
	})
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	full := 0
	const rounds = 200
	for range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.WatchStock(ctx, req)
		if errors.Is(err, runtime.ErrBulkheadFull) {
			full++
			cancel()
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_ = st
		cancel()
	}
	if full > 0 {
		t.Errorf("%d of %d streams opened right after the previous one was cancelled were refused ErrBulkheadFull: the cancelled stream's permit was not back when cancel returned", full, rounds)
	}
}

// TestAttack20CancelledStreamPermitIsBackForAUnaryCall: the same with the
// stream on the service's bulkhead, shared with GetStock: a unary call
// made as soon as the stream's caller cancelled it finds the permit free.
func TestAttack20CancelledStreamPermitIsBackForAUnaryCall(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: 1}
		atkMethod(p, atkWatchStock).Bulkhead = nil
		atkMethod(p, atkWatchStock).Timeout = 5 * time.Second
	})
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	full := 0
	const rounds = 100
	for range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := c.WatchStock(ctx, req); err != nil {
			cancel()
			t.Fatalf("stream: %v", err)
		}
		cancel()
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		switch {
		case errors.Is(err, runtime.ErrBulkheadFull):
			full++
			time.Sleep(time.Millisecond)
		case err != nil:
			t.Fatalf("GetStock: %v", err)
		}
	}
	if full > 0 {
		t.Errorf("%d of %d calls made right after a stream was cancelled were refused ErrBulkheadFull", full, rounds)
	}
	if n := srv.Calls(atkGetStock); n != rounds-full {
		t.Errorf("server saw %d GetStock, want %d", n, rounds-full)
	}
}

// TestAttack20CancelledStreamProbeIsFreeWhenCancelReturns: the README
// says a half-open probe "cancelled by its caller ... frees its place for
// the next call". On a breaker only streams go through (so streams take
// its probes), with a bulkhead that is not full, a probe stream its
// caller cancels must leave its place to a stream opened at once after.
func TestAttack20CancelledStreamProbeIsFreeWhenCancelReturns(t *testing.T) {
	atkNoLeak(t)
	clk := newAtkClock()
	_, rt, h := atkChatClient(t, 5*time.Second, 2, runtime.WithClock(clk),
		runtime.WithPolicy(func(p *policy.Service) { p.Bulkhead.Permits = 4 }))
	ctx := context.Background()
	atkFailChats(t, h, 2)
	refused := 0
	const rounds = 50
	for range rounds {
		if s, _ := rt.BreakerState(atkChat); s != runtime.StateOpen {
			t.Fatalf("breaker %v, want open", s)
		}
		clk.Advance(time.Second + time.Millisecond)
		cctx, cancel := context.WithCancel(ctx)
		if _, err := h.Call(cctx); err != nil { // the one probe
			cancel()
			t.Fatalf("probe: %v", err)
		}
		cancel()
		st, err := h.Call(ctx)
		if errors.Is(err, runtime.ErrCircuitOpen) {
			refused++
			atkWantFree(t, rt, atkChat, "a cancelled probe")
			if st, err = h.Call(ctx); err != nil {
				t.Fatalf("after the probe's place was freed: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		// This stream is the probe: its failure opens the breaker again.
		_ = st.Send(wrapperspb.String("fail"))
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d streams opened right after the half-open probe was cancelled were refused ErrCircuitOpen: the probe's place was not free when cancel returned", refused, rounds)
	}
}

// TestAttack20ReapingRacesTheStreamsOwnEndingsWithoutADoublePermit: a
// stream whose context ended is ended by whichever comes first, its
// AfterFunc, a call that finds the bulkhead full, its own Recv. Eight
// watchers open, read or not, and cancel streams on a bulkhead of 2
// without max_wait for a while; then every permit is free, and exactly
// two held streams fit again, the third refused: no permit was given
// back twice, none kept.
func TestAttack20ReapingRacesTheStreamsOwnEndingsWithoutADoublePermit(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Hang)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkWatchStock)
		m.Timeout = 5 * time.Second
		m.Bulkhead.Permits, m.Bulkhead.MaxWait = 2, 0
	})
	rt := c.Runtime()
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				ctx, cancel := context.WithCancel(context.Background())
				st, err := c.WatchStock(ctx, req)
				if err != nil && !errors.Is(err, runtime.ErrBulkheadFull) {
					t.Errorf("stream: %v", err)
				}
				if n := atkInUse(t, rt, atkWatchStock); n > 2 {
					t.Errorf("%d permits of 2 taken", n)
				}
				cancel()
				if err == nil && (g+i)%2 == 0 {
					_, _ = st.Recv() // the stream's own ending, racing the others
				}
			}
		})
	}
	wg.Wait()
	atkWantFree(t, rt, atkWatchStock, "every stream was cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		if _, err := c.WatchStock(ctx, req); err != nil {
			t.Fatalf("held stream %d of 2: %v", i+1, err)
		}
	}
	if _, err := c.WatchStock(ctx, req); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a third stream with two held: %v, want ErrBulkheadFull (a permit given back twice?)", err)
	}
	cancel()
	atkWantFree(t, rt, atkWatchStock, "the held streams were cancelled")
}
