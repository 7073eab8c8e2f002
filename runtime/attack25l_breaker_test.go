package runtime_test

// Attacks on the circuit breaker's promises (README, "Circuit breaker")
// through the generated inventory client against a real loopback server,
// the breaker's time under a fake clock (WithClock), counts as the server
// saw them.

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

// atk25lModes is a server behaviour switched by the test: fail with
// UNAVAILABLE, hold until release (or the caller gives up), or answer.
type atk25lModes struct {
	mode    atomic.Int32 // 0 UNAVAILABLE, 1 hold, 2 answer
	release chan struct{}
}

const (
	atk25lFail int32 = iota
	atk25lHold
	atk25lAnswer
)

func newAtk25lModes() *atk25lModes { return &atk25lModes{release: make(chan struct{})} }

func (m *atk25lModes) behaviour() server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		switch m.mode.Load() {
		case atk25lFail:
			return status.Error(codes.Unavailable, "injected")
		case atk25lHold:
			select {
			case <-m.release:
				return nil
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return nil
	}
}

// atk25lBreakerClient: one try per call, 10 s attempts, only the breaker
// (4 calls, ratio 0.5, cool-down 10 s, 2 probes) among the layers that
// judge the dependency.
func atk25lBreakerClient(t *testing.T, clk *fakeClock, cc grpc.ClientConnInterface, edit func(p *policy.Service)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}}, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle, p.Budget = nil, nil, nil, nil
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: 10 * time.Second, CoolDown: 10 * time.Second,
			HalfOpenProbes: 2, FailureCodes: policy.CodesOf(codes.Unavailable)}
		for i := range p.Methods {
			p.Methods[i].Retry, p.Methods[i].Timeout, p.Methods[i].OverallTimeout = nil, 10*time.Second, 0
		}
		if edit != nil {
			edit(p)
		}
	})
}

// atk25lRefusal fails the test unless err is the breaker's refusal, and
// returns how long it said was left.
func atk25lRefusal(t *testing.T, err error, what string) time.Duration {
	t.Helper()
	var re *runtime.Error
	if !errors.Is(err, runtime.ErrCircuitOpen) || status.Code(err) != codes.Unavailable || !errors.As(err, &re) {
		t.Fatalf("%s: %v (%v), want UNAVAILABLE matching ErrCircuitOpen", what, err, status.Code(err))
	}
	return re.RetryAfter
}

func atk25lGet(ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) error {
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	return err
}

// TestAttack25lBreakerCycleOnTheWire: the whole cycle, each step checked
// against what the server saw. Three failures (one below minimum_calls)
// leave it closed; the fourth opens it; while open a call is refused
// without reaching the server, saying how long is left (10 s at once,
// 1 ns one nanosecond before the end of the cool-down); at the end of
// the cool-down exactly, two probes go through and a third call is
// refused meanwhile; a probe whose caller cancels frees its place for
// the next call; the probes' successes close the breaker with an empty
// window (three failures do not open it again, the fourth does).
func TestAttack25lBreakerCycleOnTheWire(t *testing.T) {
	atkNoLeak(t)
	m := newAtk25lModes()
	fs, cc := startFault(t, m.behaviour())
	readyConn(t, cc)
	clk := newAtkClock()
	c := atk25lBreakerClient(t, clk, cc, nil)
	rt := c.Runtime()
	ctx := context.Background()

	for i := range 3 {
		if err := atk25lGet(ctx, c); status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("failure %d: %v, want the server's UNAVAILABLE", i+1, err)
		}
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "after 3 failures, one below minimum_calls: %v, want closed")
	clk.Advance(time.Second)
	if err := atk25lGet(ctx, c); errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("the 4th call was refused: %v", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "after 4 failures of 4: %v, want open")
	if n := fs.Calls(atkGetStock); n != 4 {
		t.Fatalf("server saw %d calls, want 4", n)
	}
	if left := atk25lRefusal(t, atk25lGet(ctx, c), "at the opening"); left != 10*time.Second {
		t.Errorf("at the opening the refusal says %v left, want 10s", left)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if left := atk25lRefusal(t, atk25lGet(ctx, c), "1 ns before the cool-down's end"); left != time.Nanosecond {
		t.Errorf("1 ns before the end the refusal says %v left, want 1ns", left)
	}
	if n := fs.Calls(atkGetStock); n != 4 {
		t.Fatalf("server saw %d calls while open, want the 4 before", n-4)
	}

	clk.Advance(time.Nanosecond)
	m.mode.Store(atk25lHold)
	type result struct {
		i   int
		err error
	}
	results := make(chan result, 3)
	cancels := make([]context.CancelFunc, 3)
	var wg sync.WaitGroup
	probe := func(i int) {
		pctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		wg.Go(func() { results <- result{i, atk25lGet(pctx, c)} })
	}
	defer func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel()
			}
		}
		wg.Wait()
	}()
	probe(0)
	atkWaitFor(t, "probe 1 at the server", func() bool { return fs.InFlight() == 1 })
	probe(1)
	atkWaitFor(t, "probe 2 at the server", func() bool { return fs.InFlight() == 2 })
	atkWantBreaker(t, rt, atkGetStock, runtime.StateHalfOpen, "with the probes out: %v, want half-open")
	for range 3 {
		atk25lRefusal(t, atk25lGet(ctx, c), "a call beside the 2 probes")
	}
	if n := fs.Calls(atkGetStock); n != 6 {
		t.Fatalf("server saw %d calls, want 4 + the 2 probes", n)
	}

	cancels[0]()
	if r := <-results; r.i != 0 || status.Code(r.err) != codes.Canceled {
		t.Fatalf("the cancelled probe %d ended with %v, want CANCELLED", r.i, r.err)
	}
	probe(2) // takes the place the cancelled probe freed
	atkWaitFor(t, "the next probe at the server", func() bool { return fs.Calls(atkGetStock) == 7 && fs.InFlight() == 2 })
	atk25lRefusal(t, atk25lGet(ctx, c), "a call beside the 2 probes, one of them new")

	close(m.release)
	for range 2 {
		if r := <-results; r.err != nil {
			t.Fatalf("probe %d: %v", r.i, r.err)
		}
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "after both probes succeeded: %v, want closed")

	m.mode.Store(atk25lFail)
	for i := range 3 {
		if err := atk25lGet(ctx, c); errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("failure %d after closing refused: the window was not emptied", i+1)
		}
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "3 failures after closing: %v, want closed (the window starts empty)")
	atk25lGet(ctx, c)
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "4 failures after closing: %v, want open")
}

// TestAttack25lBreakerLateResultsAndReopening: a call admitted while
// closed that fails after the breaker moved on (open, then half-open) is
// not counted against the new state: the breaker stays half-open. A probe
// that fails opens it again for another whole cool-down from that failure
// (10 s left at once, 1 ns left 1 ns before its end), and the other
// probe's success, arriving after that, does not close it.
func TestAttack25lBreakerLateResultsAndReopening(t *testing.T) {
	atkNoLeak(t)
	lateRelease, probeRelease := make(chan struct{}), make(chan struct{})
	var mode atomic.Int32 // atk25lFail, atk25lHold (until probeRelease, then answer), atk25lAnswer
	fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
		hold := func(release chan struct{}) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		if call.N == 1 {
			if err := hold(lateRelease); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "late failure")
		}
		switch mode.Load() {
		case atk25lFail:
			return status.Error(codes.Unavailable, "injected")
		case atk25lHold:
			return hold(probeRelease)
		}
		return nil
	})
	readyConn(t, cc)
	clk := newAtkClock()
	c := atk25lBreakerClient(t, clk, cc, nil)
	rt := c.Runtime()
	ctx := context.Background()
	var wg sync.WaitGroup
	defer wg.Wait()
	late := make(chan error, 1)
	wg.Go(func() { late <- atk25lGet(ctx, c) })
	atkWaitFor(t, "the late call at the server", func() bool { return fs.InFlight() == 1 })
	for range 4 {
		atk25lGet(ctx, c)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "after 4 failures: %v, want open")

	clk.Advance(10 * time.Second)
	mode.Store(atk25lHold)
	held := make(chan error, 1)
	wg.Go(func() { held <- atk25lGet(ctx, c) })
	atkWaitFor(t, "the first probe at the server", func() bool { return fs.InFlight() == 2 })
	close(lateRelease)
	if err := <-late; status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("the late call: %v, want the server's UNAVAILABLE", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateHalfOpen,
		"after a failure of a call admitted while closed: %v, want still half-open (it is not counted against the new state)")

	mode.Store(atk25lFail)
	if err := atk25lGet(ctx, c); errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("the second probe was refused: %v", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "after a probe failed: %v, want open")
	if left := atk25lRefusal(t, atk25lGet(ctx, c), "after the probe failed"); left != 10*time.Second {
		t.Errorf("after the probe failed the refusal says %v left, want a whole cool-down, 10s", left)
	}
	close(probeRelease)
	if err := <-held; err != nil {
		t.Fatalf("the first probe: %v", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "after the first probe succeeded late: %v, want still open")
	clk.Advance(10*time.Second - time.Nanosecond)
	if left := atk25lRefusal(t, atk25lGet(ctx, c), "1 ns before the second cool-down's end"); left != time.Nanosecond {
		t.Errorf("1 ns before the end the refusal says %v left, want 1ns", left)
	}
	clk.Advance(time.Nanosecond)
	mode.Store(atk25lAnswer)
	before := fs.Calls(atkGetStock)
	for i := range 2 {
		if err := atk25lGet(ctx, c); err != nil {
			t.Fatalf("probe %d after the second cool-down: %v", i+1, err)
		}
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "after 2 probes succeeded: %v, want closed")
	if n := fs.Calls(atkGetStock) - before; n != 2 {
		t.Errorf("server saw %d probes, want 2", n)
	}
}

// TestAttack25lSlowCallsCountAsFailures: with slow_call_threshold 1 s, a
// success that took the threshold exactly is a success, one that took
// 1 ns more a failure (the latency is the client's clock's, which the
// server moves while it serves). Four successes in exactly 1 s and four
// in 1 s + 1 ns make 4 / 8 = the ratio: the breaker opens at the eighth.
func TestAttack25lSlowCallsCountAsFailures(t *testing.T) {
	atkNoLeak(t)
	clk := newAtkClock()
	var took atomic.Int64
	_, cc := startFault(t, func(context.Context, server.Call) error {
		clk.Advance(time.Duration(took.Load()))
		return nil
	})
	readyConn(t, cc)
	c := atk25lBreakerClient(t, clk, cc, func(p *policy.Service) { p.Breaker.SlowCallThreshold = time.Second })
	rt := c.Runtime()
	ctx := context.Background()
	took.Store(int64(time.Second))
	for i := range 4 {
		if err := atk25lGet(ctx, c); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	took.Store(int64(time.Second + time.Nanosecond))
	for i := range 3 {
		if err := atk25lGet(ctx, c); err != nil {
			t.Fatalf("slow call %d: %v (a slow success is still the caller's answer)", i+1, err)
		}
		atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "with fewer slow calls than half: %v, want closed")
	}
	atk25lGet(ctx, c)
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "4 slow of 8: %v, want open")
}

// TestAttack25lSharedAndPerMethodBreakers: the service's breaker is shared
// by the methods without one of their own: opened by GetStock's failures
// it refuses StockReport, which never reaches the server. A method with a
// breaker of its own (per_method) neither opens the shared one nor is
// opened by it.
func TestAttack25lSharedAndPerMethodBreakers(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		atkNoLeak(t)
		fs, cc := startFault(t, func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "injected") })
		readyConn(t, cc)
		c := atk25lBreakerClient(t, newAtkClock(), cc, nil)
		for range 4 {
			atk25lGet(context.Background(), c)
		}
		_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
		atk25lRefusal(t, err, "StockReport after GetStock opened the shared breaker")
		if n := fs.Calls(atkStockReport); n != 0 {
			t.Errorf("server saw %d StockReport calls through an open breaker", n)
		}
	})
	t.Run("per method", func(t *testing.T) {
		atkNoLeak(t)
		fs, cc := startFault(t, func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "injected") })
		readyConn(t, cc)
		c := atk25lBreakerClient(t, newAtkClock(), cc, func(p *policy.Service) {
			own := *p.Breaker
			atkMethod(p, atkGetStock).Breaker = &own
		})
		rt := c.Runtime()
		for range 4 {
			atk25lGet(context.Background(), c)
		}
		atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "GetStock's own breaker after 4 failures: %v, want open")
		atkWantBreaker(t, rt, atkStockReport, runtime.StateClosed, "the shared breaker after GetStock's failures: %v, want closed")
		for i := range 3 {
			if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); errors.Is(err, runtime.ErrCircuitOpen) {
				t.Fatalf("StockReport %d refused: GetStock's breaker refused another method", i+1)
			}
		}
		// 3 failures of its own: below minimum_calls unless GetStock's 4 were counted too.
		atkWantBreaker(t, rt, atkStockReport, runtime.StateClosed, "the shared breaker after 3 of its own failures: %v, want closed")
		_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
		if errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("the 4th StockReport refused")
		}
		atkWantBreaker(t, rt, atkStockReport, runtime.StateOpen, "the shared breaker after 4 failures: %v, want open")
		if n := fs.Calls(atkStockReport); n != 4 {
			t.Errorf("server saw %d StockReport calls, want 4", n)
		}
		atk25lRefusal(t, atk25lGet(context.Background(), c), "GetStock on its own open breaker")
	})
}
