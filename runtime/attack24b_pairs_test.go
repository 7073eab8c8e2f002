package runtime_test

// Feature pairs of the client runtime, each against a real misbehaving
// server on loopback, with counts.

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack24bFlaky answers ReserveStock with UNAVAILABLE (to open the shared
// breaker) and holds GetStock until release is closed.
func attack24bFlaky(release <-chan struct{}) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		if c.Method == atkReserveStock {
			return status.Error(codes.Unavailable, "down")
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// TestAttack24bHalfOpenProbeOfAHedgedCallIsOne: README, Circuit breaker:
// after the cool-down the breaker lets half_open_probes calls through and
// refuses the rest; Hedging: every copy goes through the breaker. 16
// hedged GetStock calls (3 copies, 1 ns apart) arrive at once when the
// cool-down of a breaker with one probe has ended: the server sees one
// call, whichever copy of whichever call took the probe; the others are
// refused with ErrCircuitOpen. The probe answers, the breaker closes, its
// call gets the answer, the budget lost nothing to the copies refused, and
// no hedged copy is counted sent. The probe is most often a copy after the
// first (Go runs the goroutine started last first): before, that copy was
// charged to the budget as a retry and counted as a hedge, and its call
// counted no request, though it sent one copy (10 runs in 10).
func TestAttack24bHalfOpenProbeOfAHedgedCallIsOne(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	srv, cc := startFault(t, attack24bFlaky(release))
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clock), runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) {
		m := attack24bTinyHedge(p)
		m.Hedging.MaxCopies = 3
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
			CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{Sku: "apple", Units: 1}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v, want open")
	clock.Advance(11 * time.Second)
	m := c.Runtime().MethodNamed24b(atkGetStock)
	const n = 16
	var ok, refused, other atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrCircuitOpen):
				refused.Add(1)
			default:
				other.Add(1)
				t.Errorf("GetStock: %v, want the answer or ErrCircuitOpen", err)
			}
		})
	}
	close(gate)
	atkWaitFor(t, "every call but the probe's refused", func() bool { return refused.Load()+other.Load() == n-1 })
	atkWaitFor(t, "the probe at the server", func() bool { return srv.Calls(atkGetStock) >= 1 })
	time.Sleep(20 * time.Millisecond) // a copy too many would arrive now
	if got := srv.Calls(atkGetStock); got != 1 {
		t.Errorf("the server saw %d GetStock calls while half-open, want the one probe", got)
	}
	close(release)
	wg.Wait()
	if ok.Load() != 1 {
		t.Errorf("%d calls answered, want the probe's", ok.Load())
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateClosed, "after the probe answered the breaker is %v, want closed")
	if a := m.BudgetAvailable24b(); a != 5 {
		t.Errorf("the budget allows %d retries, want 5: no copy but the probe went", a)
	}
	got := atk22eSeries(t, reg)
	if h := got["resilient_client_retries_total{method=GetStock,outcome=hedge}"]; h != 0 {
		t.Errorf("retries_total{outcome=\"hedge\"} = %v, want 0: the probe was its call's only copy sent", h)
	}
	if a := got["resilient_client_attempts_total{code=OK,method=GetStock}"]; a != 1 {
		t.Errorf("attempts_total{code=OK} = %v, want the probe", a)
	}
}

// TestAttack24bDeadContextTouchesNoLayerOfAHedgedCall: README, Order of
// the layers: a call whose context is already over is answered at once
// with its context's code, before any layer: no token, permit, probe or
// budget request, no fallback, nothing counted. A hedged GetStock (1 ns
// delay) with every layer in force (rate limit of one token, bulkhead,
// throttler, adaptive limit, a breaker just past its cool-down with one
// probe, a budget, metrics, a fallback and grpc.OnFinish) is called 30
// times with a cancelled and 30 with an expired context: each gets
// CANCELLED or DEADLINE_EXCEEDED, OnFinish runs once with it, the
// fallback never, the server sees nothing, and no series moves. Then a
// live call still finds the token, the probe and the budget untouched:
// it reaches the server and closes the breaker.
func TestAttack24bDeadContextTouchesNoLayerOfAHedgedCall(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	close(release) // GetStock answers at once
	srv, cc := startFault(t, attack24bFlaky(release))
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	var fellBack atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clock), runtime.WithRegisterer(reg)},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.GetStockResponse{Units: -1}, nil
		},
	}, func(p *policy.Service) {
		attack24bTinyHedge(p)
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 2} // ReserveStock's and the live call's
		p.Bulkhead = &policy.Bulkhead{Permits: 4}
		// The window forgets ReserveStock's failure by the cool-down's end.
		p.ClientThrottle = &policy.Throttle{K: 2, Window: 5 * time.Second, MaxRefusal: 0.9}
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 4, InitialLimit: 4,
			Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
			CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
	})
	live, cancelLive := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLive()
	if _, err := c.ReserveStock(live, &inventoryv1.ReserveStockRequest{Sku: "apple", Units: 1}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v, want open")
	clock.Advance(11 * time.Second)
	m := c.Runtime().MethodNamed24b(atkGetStock)
	budget := m.BudgetAvailable24b()
	base := atk22eSeries(t, reg)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want codes.Code
	}{{canceled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
		for i := range 30 {
			var finished []error
			_, err := c.GetStock(tc.ctx, &inventoryv1.GetStockRequest{Sku: "apple"},
				grpc.OnFinish(func(err error) { finished = append(finished, err) }))
			if status.Code(err) != tc.want {
				t.Fatalf("call %d: %v, want %v", i, err, tc.want)
			}
			if len(finished) != 1 || status.Code(finished[0]) != tc.want {
				t.Fatalf("call %d: OnFinish ran with %v, want once with %v", i, finished, tc.want)
			}
		}
	}
	if n := fellBack.Load(); n != 0 {
		t.Errorf("the fallback ran %d times, want never", n)
	}
	if n := srv.Calls(atkGetStock); n != 0 {
		t.Errorf("the server saw %d GetStock calls, want none", n)
	}
	if a := m.BudgetAvailable24b(); a != budget {
		t.Errorf("the budget allows %d retries, want %d as before", a, budget)
	}
	atk22eWantSeries(t, reg, base, "60 calls on a dead context")

	// The token, the probe and the budget are all still there.
	if resp, err := c.GetStock(live, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil || resp.GetUnits() < 0 || fellBack.Load() != 0 {
		t.Fatalf("the live call: %v %v (fallbacks %d), want the server's answer", resp, err, fellBack.Load())
	}
	// 1 ns later the live call's second copy may be let through once the
	// probe's answer closed the breaker (1 of 20 runs under -race): one
	// or two calls, never none.
	if n := srv.Calls(atkGetStock); n != 1 && n != 2 {
		t.Errorf("the server saw %d GetStock calls, want the live one (and at most its copy)", n)
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateClosed, "after the live probe answered the breaker is %v, want closed")
}

// TestAttack24bBudgetOfTinyHedgesUnderLoadIsExact: README, Retries and the
// retry budget: retries ≤ ratio × requests + min_retries, a request being
// a call that sent something and a retry each copy sent after its call's
// first. 100 callers at once, each a hedged GetStock of up to 4 copies 1 ns
// apart, against a server that fails every call UNAVAILABLE (non-fatal),
// through a throttler that refuses most copies at random: copies are let
// through in any order, many refused. The server tells the calls apart by
// a header: the copies beyond each call's first are at most 10 % of the
// calls that reached it plus 5, retries_total{outcome="hedge"} counts
// exactly them, and the budget (on a clock that does not move) has
// exactly the rest of its allowance left.
func TestAttack24bBudgetOfTinyHedgesUnderLoadIsExact(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	seen := map[string]int{}
	srv, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if id := md.Get("x-call"); len(id) == 1 {
			mu.Lock()
			seen[id[0]]++
			mu.Unlock()
		}
		return status.Error(codes.Unavailable, "down")
	})
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(newAtkClock()), runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) {
		m := attack24bTinyHedge(p)
		m.Hedging.MaxCopies = 4
		p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 5, Window: time.Minute}
		p.ClientThrottle = &policy.Throttle{K: 2, Window: time.Minute, MaxRefusal: 0.5}
	})
	m := c.Runtime().MethodNamed24b(atkGetStock)
	const n = 100
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-call", strconv.Itoa(i))
			if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want UNAVAILABLE", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	mu.Lock()
	requests := len(seen)
	mu.Unlock()
	calls := srv.Calls(atkGetStock)
	extra := calls - requests
	allowance := requests/10 + 5
	if extra > allowance {
		t.Errorf("the server saw %d copies beyond the first of %d calls, want at most %d", extra, requests, allowance)
	}
	if h := atk22eSeries(t, reg)["resilient_client_retries_total{method=GetStock,outcome=hedge}"]; h != float64(extra) {
		t.Errorf("retries_total{outcome=\"hedge\"} = %v, want %d: the copies sent beyond each call's first", h, extra)
	}
	if a := m.BudgetAvailable24b(); a != allowance-extra {
		t.Errorf("the budget allows %d retries, want %d: %d requests, %d copies beyond their first", a, allowance-extra, requests, extra)
	}
}

// TestAttack24bBudgetIsAskedBeforeTheThrottler: README, Client-side
// throttling: "The budget is asked first: a retry must fit the budget,
// then pass the throttler like any attempt." The server fails every
// GetStock UNAVAILABLE with a pushback of 1 ms; the budget has no retry to
// give (1 % of fewer than 100 requests, no floor); the throttler refuses
// most attempts. Over 60 retried calls (3 attempts), each whose first
// attempt went has its retry refused by the budget, never by the
// throttler, which is not asked: throttled_total counts the first
// attempts it refused only, and the server saw each first attempt sent.
func TestAttack24bBudgetIsAskedBeforeTheThrottler(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, atkPushback("1"))
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
	}, func(p *policy.Service) {
		m := attack23mBare(p)
		m.Timeout = 3 * time.Second
		m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}
		p.ClientThrottle = &policy.Throttle{K: 2, Window: time.Minute, MaxRefusal: 0.9}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const calls = 60
	throttled, budgeted := 0, 0
	for i := range calls {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		switch {
		case errors.Is(err, runtime.ErrThrottled):
			throttled++
		case errors.Is(err, runtime.ErrBudgetExhausted) && status.Code(err) == codes.Unavailable:
			budgeted++
		default:
			t.Fatalf("call %d: %v, want ErrThrottled or ErrBudgetExhausted", i, err)
		}
	}
	got := atk22eSeries(t, reg)
	if n := srv.Calls(atkGetStock); n != budgeted {
		t.Errorf("the server saw %d calls, want %d: the first attempts sent", n, budgeted)
	}
	if v := got["resilient_client_throttled_total{method=GetStock}"]; v != float64(throttled) {
		t.Errorf("throttled_total = %v, want %d: the first attempts refused; a retry the budget refused never asks the throttler", v, throttled)
	}
	for k, want := range map[string]float64{
		"resilient_client_retries_total{method=GetStock,outcome=budget}":    float64(budgeted),
		"resilient_client_retries_total{method=GetStock,outcome=throttler}": 0,
		"resilient_client_retries_total{method=GetStock,outcome=made}":      0,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}
