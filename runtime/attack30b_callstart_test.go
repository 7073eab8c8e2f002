package runtime_test

// The change "a call under a caller's deadline reads the clock once" lets
// a call's first attempt count its per-attempt timeout from the reading
// taken at the call's start. The reading is dropped after the waits the
// runtime knows of (a token, a permit, a backoff, a hedged copy), and, as
// first landed, was not after the breaker's admission, which runs the
// observers and the logger synchronously on the caller's goroutine when a
// call finds the cool-down over (README, Logs and events). A slow observer
// there (a log sink, a tracer exporting) was time the attempt never had:
// the attempt reached the server with its timeout less the observer's
// time (about 200 ms of 400). Now a client with a logger or observers
// does not reuse the reading (invocation.start).

import (
	"context"
	"sync"
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

const (
	a30bTimeout  = 400 * time.Millisecond // the attempt's timeout
	a30bObserver = 200 * time.Millisecond // what the observer takes at the half-open transition
)

// TestAttack30bSlowObserverAtHalfOpenShortensTheProbesTimeout opens the
// breaker with two failures, moves the fake clock past the cool-down and
// makes one call under a minute's deadline: the breaker moves to half-open
// in that call's admission, and an observer of the transition takes 200 ms.
// The probe is the call's first attempt, and its 400 ms timeout should be
// counted from its own start, as it was before the change (and as it is
// without a caller's deadline).
// a30bRig is what both tests call through: a loopback server that
// records the time each call has left and fails UNAVAILABLE while failing
// is set, and the generated client on the fake clock clk, observed by
// observe, its policy edited by edit.
type a30bRig struct {
	mu      sync.Mutex
	left    []time.Duration // guarded by mu
	failing bool            // guarded by mu
	c       *inventoryv1.InventoryServiceResilientClient
	ctx     func() (context.Context, context.CancelFunc)
}

func newA30bRig(t *testing.T, withDeadline bool, clk runtime.Clock, observe func(runtime.Event), edit func(*policy.Service)) *a30bRig {
	r := &a30bRig{failing: true, ctx: func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}}
	if withDeadline {
		r.ctx = func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		}
	}
	_, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		dl, ok := ctx.Deadline()
		r.mu.Lock()
		defer r.mu.Unlock()
		if ok {
			r.left = append(r.left, time.Until(dl))
		} else {
			r.left = append(r.left, -1)
		}
		if r.failing {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	r.c = atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clk), runtime.WithObserver(observe)},
	}, edit)
	return r
}

// call makes one GetStock, under a minute's deadline or none.
func (r *a30bRig) call() error {
	ctx, cancel := r.ctx()
	defer cancel()
	_, err := r.c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	return err
}

func TestAttack30bSlowObserverAtHalfOpenShortensTheProbesTimeout(t *testing.T) {
	for _, withDeadline := range []bool{false, true} {
		name := "no caller deadline"
		if withDeadline {
			name = "caller deadline of a minute"
		}
		t.Run(name, func(t *testing.T) {
			atkNoLeak(t)
			clk := newAtkClock()
			var slow atomic.Bool
			observe := func(e runtime.Event) {
				if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateHalfOpen && slow.Load() {
					time.Sleep(a30bObserver) // a slow log sink or exporter
				}
			}
			r := newA30bRig(t, withDeadline, clk, observe, func(p *policy.Service) {
				p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second,
					CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.OverallTimeout, m.Hedging, m.Bulkhead, m.Breaker, m.Retry = a30bTimeout, 0, nil, nil, nil, nil
			})
			for range 2 {
				if err := r.call(); status.Code(err) != codes.Unavailable {
					t.Fatalf("opening the breaker: %v, want UNAVAILABLE", err)
				}
			}
			if err := r.call(); status.Code(err) != codes.Unavailable {
				t.Fatalf("with the breaker open: %v, want its refusal (UNAVAILABLE)", err)
			}
			r.mu.Lock()
			if len(r.left) != 2 {
				r.mu.Unlock()
				t.Fatalf("the server saw %d calls before the cool-down, want 2 (the breaker open after them)", len(r.left))
			}
			r.failing = false
			r.mu.Unlock()
			clk.Advance(2 * time.Second)
			slow.Store(true)
			if err := r.call(); err != nil {
				t.Fatalf("the half-open probe: %v, want its answer", err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.left) != 3 {
				t.Fatalf("the server saw %d calls, want 3", len(r.left))
			}
			got := r.left[2]
			t.Logf("the probe reached the server with %v left of its %v timeout", got, a30bTimeout)
			if got > a30bTimeout || got < a30bTimeout-a30bObserver/2 {
				t.Errorf("the probe, the call's first attempt, reached the server with %v left; want its whole timeout %v "+
					"(less loopback), not the timeout less the %v the observer took before the attempt began", got, a30bTimeout, a30bObserver)
			}
		})
	}
}

// TestAttack30bSlowObserverAtBudgetRecoveryShortensTheFirstAttempt: the
// same through the other event raised on the caller's goroutine before a
// call's first attempt, the retry budget's recovery (retried reports it
// at the first call after a whole window without a refusal). An observer
// of it that takes 200 ms leaves that call's first attempt 200 ms of its
// 400 ms timeout under a caller's deadline, its whole timeout without one.
func TestAttack30bSlowObserverAtBudgetRecoveryShortensTheFirstAttempt(t *testing.T) {
	for _, withDeadline := range []bool{false, true} {
		name := "no caller deadline"
		if withDeadline {
			name = "caller deadline of a minute"
		}
		t.Run(name, func(t *testing.T) {
			atkNoLeak(t)
			clk := newAtkClock()
			var slow, exhausted, recovered atomic.Bool
			observe := func(e runtime.Event) {
				switch e.Kind {
				case runtime.EventBudgetExhausted:
					exhausted.Store(true)
				case runtime.EventBudgetRecovered:
					recovered.Store(true)
					if slow.Load() {
						time.Sleep(a30bObserver) // a slow log sink or exporter
					}
				}
			}
			r := newA30bRig(t, withDeadline, clk, observe, func(p *policy.Service) {
				p.Bulkhead, p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
				p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 1, Window: time.Second}
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.OverallTimeout, m.Hedging, m.Bulkhead, m.Breaker = a30bTimeout, 0, nil, nil, nil
				m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
			})
			for range 3 {
				_ = r.call()
				if exhausted.Load() {
					break
				}
			}
			if !exhausted.Load() {
				t.Fatal("the budget never refused a retry")
			}
			r.mu.Lock()
			n := len(r.left)
			r.failing = false
			r.mu.Unlock()
			clk.Advance(5 * time.Second)
			slow.Store(true)
			if err := r.call(); err != nil {
				t.Fatalf("the call after the window: %v, want its answer", err)
			}
			if !recovered.Load() {
				t.Fatal("the call after a whole window without a refusal reported no recovery")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.left) != n+1 {
				t.Fatalf("the server saw %d calls after the window, want 1", len(r.left)-n)
			}
			got := r.left[n]
			t.Logf("the first attempt reached the server with %v left of its %v timeout", got, a30bTimeout)
			if got > a30bTimeout || got < a30bTimeout-a30bObserver/2 {
				t.Errorf("the call's first attempt reached the server with %v left; want its whole timeout %v "+
					"(less loopback), not the timeout less the %v the observer took before the attempt began", got, a30bTimeout, a30bObserver)
			}
		})
	}
}
