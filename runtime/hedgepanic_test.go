package runtime_test

// A hedged copy's panic (or runtime.Goexit) reaches the caller whenever it
// comes while the call waits for its copies: while the call reads their
// answers, and after it has its answer, while it waits for its losers to
// end. The call panics with the first, once every copy has ended; none
// panics on a copy's own goroutine, which would end the program.

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// hedgeLosers is a client whose GetStock is hedged (5 ms apart, copies
// copies) against a healthy server, with a client interceptor: the last
// copy answers; each one before it waits until it is cut (a loser once the
// last answered) and then does what cut(n) does, n its number from 1.
// running counts the copies in the interceptor.
func hedgeLosers(t *testing.T, copies int, cut func(n int32), opts ...runtime.Option) (c *inventoryv1.InventoryServiceResilientClient, running *atomic.Int32) {
	t.Helper()
	var sent atomic.Int32
	running = new(atomic.Int32)
	icpt := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
		running.Add(1)
		defer running.Add(-1)
		if n := sent.Add(1); n < int32(copies) {
			<-ctx.Done()
			cut(n)
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, o...)
	})
	_, cc := startFaultWith(t, server.Healthy, nil, icpt)
	c = atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 5 * time.Second
		m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: copies}
	})
	return c, running
}

// The second copy answers; the first, cut as the loser, panics in its
// interceptor. The call had its answer, and panics with the loser's panic
// once the loser has ended (before, the loser panicked on its own
// goroutine, which ended the program).
func TestHedgedLoserThatPanicsAfterTheAnswerReachesTheCaller(t *testing.T) {
	atkNoLeak(t)
	c, running := hedgeLosers(t, 2, func(int32) { panic("the loser panicked") })
	var inCopies int32 = -1
	p := r18Panicked(func() {
		defer func() { inCopies = running.Load() }()
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	})
	if p != "the loser panicked" {
		t.Fatalf("the call's panic: %v, want the loser's", p)
	}
	if inCopies != 0 {
		t.Errorf("the call panicked with %d copies still in their interceptor, want 0", inCopies)
	}
}

// Two losers panic as they are cut: the call panics once, with one of
// them, after both ended.
func TestHedgedLosersThatPanicTheFirstGoesOn(t *testing.T) {
	atkNoLeak(t)
	var panicked atomic.Int32
	c, running := hedgeLosers(t, 3, func(n int32) {
		panicked.Add(1)
		panic(fmt.Sprintf("loser %d", n))
	})
	var inCopies, seen int32 = -1, -1
	p := r18Panicked(func() {
		defer func() { inCopies, seen = running.Load(), panicked.Load() }()
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	})
	if p != "loser 1" && p != "loser 2" {
		t.Fatalf("the call's panic: %v, want one of the losers'", p)
	}
	if inCopies != 0 || seen != 2 {
		t.Errorf("the call panicked with %d copies in their interceptor and %d of 2 losers' panics raised, want 0 and 2", inCopies, seen)
	}
}

// A loser that ends its goroutine by runtime.Goexit (an observer's or an
// interceptor's t.FailNow) after the call has its answer ends the caller's
// goroutine too, once every copy has ended, as the same call's would have
// unhedged: the call does not return.
func TestHedgedLoserGoexitAfterTheAnswerEndsTheCallersGoroutine(t *testing.T) {
	atkNoLeak(t)
	c, running := hedgeLosers(t, 2, func(int32) { goruntime.Goexit() })
	done := make(chan struct{})
	var returned atomic.Bool
	var inCopies atomic.Int32
	inCopies.Store(-1)
	go func() {
		defer close(done)
		defer func() { inCopies.Store(running.Load()) }()
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		returned.Store(true)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call whose loser ended by runtime.Goexit neither returned nor ended in 5 s")
	}
	if returned.Load() {
		t.Errorf("the call returned: its loser's runtime.Goexit should have ended the caller's goroutine")
	}
	if n := inCopies.Load(); n != 0 {
		t.Errorf("the caller's goroutine ended with %d copies still in their interceptor, want 0", n)
	}
}

// The call's own goroutine panics (an observer of the budget's refusal of
// the second copy, raised there) while its first copy, cut then, panics
// too: the call's own panic goes on, alone, once the copy has ended; the
// copy's is dropped, neither raised a second time on the caller's
// goroutine nor on the copy's own.
func TestHedgedCallsOwnPanicGoesOnAloneWhenACopyPanicsAsItIsCut(t *testing.T) {
	atkNoLeak(t)
	var copyPanicked atomic.Bool
	icpt := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
		<-ctx.Done()
		copyPanicked.Store(true)
		panic("the copy panicked")
	})
	_, cc := startFaultWith(t, server.Healthy, nil, icpt)
	c := hedgedClientWhoseObserverPanicsAtTheBudget(t, cc)
	var copyEnded bool
	p := r18Panicked(func() {
		defer func() { copyEnded = copyPanicked.Load() }()
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	})
	if p != "the call's observer panicked" {
		t.Fatalf("the call's panic: %v, want its own observer's", p)
	}
	if !copyEnded {
		t.Errorf("the call's panic went on before its copy, cut, had panicked")
	}
}

// hedgedClientWhoseObserverPanicsAtTheBudget is a client of cc whose
// GetStock is hedged (2 copies, 5 ms apart) under a budget with no retry
// to give, its observer panicking when the budget refuses the second
// copy: the call's own panic, on the caller's goroutine.
func hedgedClientWhoseObserverPanicsAtTheBudget(t *testing.T, cc grpc.ClientConnInterface) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	observer := runtime.WithObserver(func(e runtime.Event) {
		if e.Kind == runtime.EventBudgetExhausted {
			panic("the call's observer panicked")
		}
	})
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{observer}}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 5 * time.Second
		m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2}
	})
}
