package runtime_test

// Attacks on the order of the layers (README, "Order of the layers"):
// fallback → cache → rate limit → bulkhead → overall limit → retry →
// throttler → adaptive limit → breaker → attempt, each checked by what an
// outer layer's refusal leaves untouched in the inner ones, against a
// real loopback server.

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestAttack25lACallWaitingForATokenHoldsNoPermit: the rate limit is
// outside the bulkhead. A bucket of 1 refilled once a second, a bulkhead
// of 2: the first call takes the token and a permit and is held by the
// server; the second waits about a second for its token, and holds no
// permit meanwhile (one permit taken, not two); then it takes the second.
func TestAttack25lACallWaitingForATokenHoldsNoPermit(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	readyConn(t, cc)
	c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 2}, func(p *policy.Service) {
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1, Burst: 1, MaxWait: 5 * time.Second}
	})
	rt := c.Runtime()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	errs := make(chan error, 2)
	wg.Go(func() { errs <- atk25lGet(context.Background(), c) })
	atkWaitFor(t, "the first call at the server", func() bool { return fs.InFlight() == 1 })
	begin := time.Now()
	wg.Go(func() { errs <- atk25lGet(context.Background(), c) })
	// For 300 ms of the second call's wait for a token (about a second).
	for time.Since(begin) < 300*time.Millisecond {
		if n, _ := rt.BulkheadInUse(atkGetStock); n != 1 {
			t.Fatalf("%d permits taken while the second call waits for its token, want the first call's 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	atkWaitFor(t, "the second call at the server", func() bool { return fs.InFlight() == 2 })
	if n, _ := rt.BulkheadInUse(atkGetStock); n != 2 {
		t.Errorf("%d permits taken with both calls at the server, want 2", n)
	}
}

// TestAttack25lOuterRefusalsNeverReachTheBreaker: "every attempt that
// reaches the dependency is recorded by the breaker, and nothing else
// is". Breaker of 4 calls at 0.5. With the bulkhead's only permit held
// (max_wait 0), or the adaptive limit's only place (min = max = 1), 50
// calls are refused: the breaker stays closed (they are not failures).
// The held call's success and 3 failures of the server's then open it
// (the refusals were not successes either: 3 failures of 54 calls would
// not). Every attempt of a retried
// call is recorded: one call of 4 failed attempts opens a fresh breaker.
func TestAttack25lOuterRefusalsNeverReachTheBreaker(t *testing.T) {
	for _, layer := range []string{"bulkhead", "adaptive limit"} {
		t.Run(layer, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			var failing atomic.Bool
			fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
				if call.N == 1 {
					return atkHold(release)(ctx, call)
				}
				if failing.Load() {
					return status.Error(codes.Unavailable, "injected")
				}
				return nil
			})
			readyConn(t, cc)
			refusal := runtime.ErrBulkheadFull
			c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: time.Minute, CoolDown: time.Minute,
					HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
				if layer != "bulkhead" {
					p.Bulkhead = &policy.Bulkhead{Permits: 100, MaxWait: time.Second}
					p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
				}
			})
			if layer != "bulkhead" {
				refusal = runtime.ErrConcurrencyLimited
			}
			rt := c.Runtime()
			held := make(chan error, 1)
			go func() { held <- atk25lGet(context.Background(), c) }()
			atkWaitFor(t, "the held call at the server", func() bool { return fs.InFlight() == 1 })
			for i := range 50 {
				if err := atk25lGet(context.Background(), c); !errors.Is(err, refusal) || status.Code(err) != codes.ResourceExhausted {
					close(release)
					<-held
					t.Fatalf("call %d: %v, want RESOURCE_EXHAUSTED matching %v", i+1, err, refusal)
				}
			}
			atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "after 50 refusals: %v, want closed")
			close(release)
			if err := <-held; err != nil {
				t.Fatalf("the held call: %v", err)
			}
			failing.Store(true)
			for range 3 {
				atk25lGet(context.Background(), c)
			}
			atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen,
				"after 3 failures beside 1 success and 50 refusals: %v, want open (the refusals were counted as successes)")
			if n := fs.Calls(atkGetStock); n != 4 {
				t.Errorf("server saw %d calls, want 4", n)
			}
		})
	}
	t.Run("retried attempts", func(t *testing.T) {
		atkNoLeak(t)
		fs, cc := startFault(t, func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "injected") })
		readyConn(t, cc)
		c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: time.Minute, CoolDown: time.Minute,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			atkMethod(p, atkGetStock).Retry = &policy.Retry{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		})
		atk25lGet(context.Background(), c)
		if n := fs.Calls(atkGetStock); n != 4 {
			t.Fatalf("server saw %d attempts, want 4", n)
		}
		atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "after one call of 4 failed attempts: %v, want open")
	})
}

// TestAttack25lTheFallbackSeesTheFinalError: the fallback is the
// outermost layer. A fallback that answers nothing leaves the caller the
// call's error, and it must have been given that same error: the last
// attempt's after retries (the server numbers its answers), the
// bulkhead's refusal, the rate limit's, and the breaker's when it opened
// between two attempts of the call.
func TestAttack25lTheFallbackSeesTheFinalError(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	var holdFirst atomic.Bool
	fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
		if holdFirst.CompareAndSwap(true, false) {
			return atkHold(release)(ctx, call)
		}
		return status.Error(codes.Unavailable, fmt.Sprintf("answer %d", call.N))
	})
	readyConn(t, cc)
	var mu sync.Mutex
	var seen []error
	o := inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			mu.Lock()
			seen = append(seen, err)
			mu.Unlock()
			return nil, nil
		},
	}
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	check := func(t *testing.T, c *inventoryv1.InventoryServiceResilientClient, want func(error) bool, what string) {
		t.Helper()
		mu.Lock()
		seen = nil
		mu.Unlock()
		err := atk25lGet(context.Background(), c)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 {
			t.Fatalf("%s: the fallback ran %d times, want once", what, len(seen))
		}
		if seen[0] == nil || err == nil || seen[0].Error() != err.Error() || status.Code(seen[0]) != status.Code(err) {
			t.Errorf("%s: the fallback saw %v, the caller got %v", what, seen[0], err)
		}
		if !want(seen[0]) {
			t.Errorf("%s: the fallback saw %v", what, seen[0])
		}
	}

	t.Run("after retries", func(t *testing.T) {
		c := atk25lBulkheadClient(t, cc, o, policy.Bulkhead{Permits: 1}, func(p *policy.Service) { atkMethod(p, atkGetStock).Retry = retry })
		before := fs.Calls(atkGetStock)
		check(t, c, func(err error) bool {
			return status.Code(err) == codes.Unavailable && strings.HasSuffix(err.Error(), fmt.Sprintf("last error: rpc error: code = Unavailable desc = answer %d", before+3))
		}, "three failed attempts")
	})
	t.Run("breaker opened between attempts", func(t *testing.T) {
		c := atk25lBulkheadClient(t, cc, o, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
			atkMethod(p, atkGetStock).Retry = retry
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, CoolDown: time.Minute,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		})
		before := fs.Calls(atkGetStock)
		check(t, c, func(err error) bool { return errors.Is(err, runtime.ErrCircuitOpen) }, "two failed attempts, then the breaker")
		if n := fs.Calls(atkGetStock) - before; n != 2 {
			t.Errorf("server saw %d attempts, want 2 before the breaker opened", n)
		}
	})
	t.Run("bulkhead and rate limit", func(t *testing.T) {
		c := atk25lBulkheadClient(t, cc, o, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
		})
		holdFirst.Store(true)
		var wg sync.WaitGroup
		wg.Go(func() { atk25lGet(context.Background(), c) }) // the first token and the only permit
		atkWaitFor(t, "the held call at the server", func() bool { return fs.InFlight() == 1 })
		// The second token, given back: the call was not sent.
		check(t, c, func(err error) bool { return errors.Is(err, runtime.ErrBulkheadFull) }, "the bulkhead full")
		close(release)
		wg.Wait()
		mu.Lock()
		seen = nil
		mu.Unlock()
		before := fs.Calls(atkGetStock)
		atk25lGet(context.Background(), c) // the second token, spent on a call sent (the server fails it)
		if n := fs.Calls(atkGetStock) - before; n != 1 {
			t.Fatalf("a call with the permit free and a token left: the server saw %d attempts, want 1", n)
		}
		check(t, c, func(err error) bool { return errors.Is(err, runtime.ErrRateLimited) }, "no token left")
	})
}

// TestAttack25lADeadContextTakesNoTokenAndAnEndedWaitGivesItBack: a bucket
// of 1 that never refills (in the test's time): 20 calls on contexts
// already over are answered with their context's code and take nothing,
// so a live call then finds the token, and the next live call none. With
// a bucket of 1 refilled every 500 ms (max_wait 2 s): the first call
// takes the token, a second waits for the next one and is cancelled at
// 100 ms (CANCELLED), giving its reservation back; a third call then
// waits for that same next token (about 400 ms more), not the one after
// it (about 900 ms).
func TestAttack25lADeadContextTakesNoTokenAndAnEndedWaitGivesItBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	t.Run("dead contexts", func(t *testing.T) {
		c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
		})
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel2()
		for range 10 {
			if err := atk25lGet(cancelled, c); status.Code(err) != codes.Canceled {
				t.Fatalf("cancelled context: %v", err)
			}
			if err := atk25lGet(expired, c); status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("expired context: %v", err)
			}
		}
		before := fs.Calls(atkGetStock)
		if err := atk25lGet(context.Background(), c); err != nil {
			t.Fatalf("the live call after 20 dead ones: %v (they took the token)", err)
		}
		if err := atk25lGet(context.Background(), c); !errors.Is(err, runtime.ErrRateLimited) {
			t.Fatalf("the second live call: %v, want ErrRateLimited (a bucket of 1)", err)
		}
		if n := fs.Calls(atkGetStock) - before; n != 1 {
			t.Errorf("server saw %d calls, want 1", n)
		}
	})
	t.Run("a wait ended by the caller", func(t *testing.T) {
		c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 4}, func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 2, Burst: 1, MaxWait: 2 * time.Second}
		})
		if err := atk25lGet(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(100*time.Millisecond, cancel)
		defer stop.Stop()
		if err := atk25lGet(ctx, c); status.Code(err) != codes.Canceled {
			t.Fatalf("the call cancelled while waiting for a token: %v, want CANCELLED", err)
		}
		cancel()
		begin := time.Now()
		if err := atk25lGet(context.Background(), c); err != nil {
			t.Fatalf("the third call: %v", err)
		}
		if took := time.Since(begin); took > 700*time.Millisecond {
			t.Errorf("the third call waited %v for a token, want about 400ms (the cancelled wait kept its token)", took)
		}
	})
}

// TestAttack25lATokenTakenGoesBackWhenTheCallerLeavesTheBulkheadWait: a
// bucket of 2 that never refills (in the test's time), one permit held
// by a call the server holds. A second call takes the second token and
// waits for the permit; its caller cancels (CANCELLED). The call was not
// sent, so its token goes back: a third call, with a 100 ms deadline,
// takes it and waits for the permit in turn (DEADLINE_EXCEEDED), where
// before the token was spent and it was refused by the rate limit at once.
func TestAttack25lATokenTakenGoesBackWhenTheCallerLeavesTheBulkheadWait(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	readyConn(t, cc)
	c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1, MaxWait: 5 * time.Second}, func(p *policy.Service) {
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	wg.Go(func() { atk25lGet(context.Background(), c) })
	atkWaitFor(t, "the held call at the server", func() bool { return fs.InFlight() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	if err := atk25lGet(ctx, c); status.Code(err) != codes.Canceled {
		t.Fatalf("the call cancelled waiting for a permit: %v, want CANCELLED", err)
	}
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := atk25lGet(ctx, c); status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrRateLimited) {
		t.Fatalf("the third call: %v, want DEADLINE_EXCEEDED waiting for the permit with the token given back (not ErrRateLimited)", err)
	}
	if n := fs.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d calls, want the held one only", n)
	}
}

// TestAttack25lOneTokenAndOnePermitForAllAttempts: a bucket of 1 that
// never refills and a bulkhead of 1. A call retried twice (the server
// fails its first two attempts) and a hedged call of three copies (the
// first two hang) are each served, every attempt or copy sent on the
// call's one token and one permit.
func TestAttack25lOneTokenAndOnePermitForAllAttempts(t *testing.T) {
	for _, mode := range []string{"retried", "hedged"} {
		t.Run(mode, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
				if call.N >= 3 {
					return nil
				}
				if mode == "retried" {
					return status.Error(codes.Unavailable, "injected")
				}
				<-ctx.Done()
				return status.FromContextError(ctx.Err()).Err()
			})
			readyConn(t, cc)
			c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1}, func(p *policy.Service) {
				p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
				m := atkMethod(p, atkGetStock)
				if mode == "retried" {
					m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
						Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
				} else {
					m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
				}
			})
			if err := atk25lGet(context.Background(), c); err != nil {
				t.Fatalf("%s call: %v (an attempt wanted a token or a permit of its own)", mode, err)
			}
			if n := fs.Calls(atkGetStock); n != 3 {
				t.Errorf("server saw %d attempts, want 3", n)
			}
			atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after the call")
			if err := atk25lGet(context.Background(), c); !errors.Is(err, runtime.ErrRateLimited) {
				t.Errorf("the next call: %v, want ErrRateLimited (the bucket held 1)", err)
			}
		})
	}
}

// TestAttack25lAnAdaptiveRefusalTakesNoProbe: GetStock has a breaker of
// its own (one half-open probe) and shares the service's adaptive limit,
// held at 1, with StockReport. With GetStock's breaker half-open and a
// StockReport holding the limit's only place, GetStock calls are refused
// by the limit (ErrConcurrencyLimited, not ErrCircuitOpen) and reach
// neither the breaker nor the server; once the StockReport is answered
// the next GetStock is the probe, and its success closes the breaker.
func TestAttack25lAnAdaptiveRefusalTakesNoProbe(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	var failing atomic.Bool
	failing.Store(true)
	fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
		if call.Method == atkStockReport {
			return atkHold(release)(ctx, call)
		}
		if failing.Load() {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	})
	readyConn(t, cc)
	clk := newAtkClock()
	c := atk25lBreakerClient(t, clk, cc, func(p *policy.Service) {
		own := *p.Breaker
		own.HalfOpenProbes = 1
		atkMethod(p, atkGetStock).Breaker = &own
		p.Bulkhead = &policy.Bulkhead{Permits: 8}
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
	})
	rt := c.Runtime()
	for range 4 {
		atk25lGet(context.Background(), c)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "GetStock's breaker after 4 failures: %v, want open")
	clk.Advance(10 * time.Second)
	failing.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	defer letGo()
	wg.Go(func() {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
			t.Errorf("StockReport: %v", err)
		}
	})
	atkWaitFor(t, "the StockReport holding the limit", func() bool { return fs.InFlight() == 1 })
	before := fs.Calls(atkGetStock)
	for i := range 3 {
		if err := atk25lGet(context.Background(), c); !errors.Is(err, runtime.ErrConcurrencyLimited) {
			t.Fatalf("GetStock %d with the limit full: %v, want ErrConcurrencyLimited", i+1, err)
		}
	}
	if n := fs.Calls(atkGetStock) - before; n != 0 {
		t.Fatalf("server saw %d GetStock calls, want none", n)
	}
	letGo()
	wg.Wait()
	if err := atk25lGet(context.Background(), c); err != nil {
		t.Fatalf("GetStock after the limit's place came back: %v (a refusal took the only probe)", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "GetStock's breaker after its probe succeeded: %v, want closed")
}
