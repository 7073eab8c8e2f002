package runtime_test

// Attacks on the rate-limit token a call gives back when it is then not
// sent (README, Rate limit: "A call that took its token and is then not
// sent, because the bulkhead (the next layer) refused it or its context
// ended waiting for a permit, gives the token back"; Order of the layers:
// "A token already taken when the context then ends waiting for a
// permit, or when the bulkhead refuses the call, goes back (to the next
// in the rate limit's queue, or to the bucket): the call was not sent";
// "a call holds one bulkhead permit and one rate-limit token for all its
// attempts and hedged copies").

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29dHoldTagged holds the calls tagged x-hold until release (or their
// caller gives up) and answers the others at once.
func atk29dHoldTagged(release <-chan struct{}) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-hold")) > 0 {
			return atkHold(release)(ctx, c)
		}
		return nil
	}
}

func atk29dHeld(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-hold", "1")
}

// TestAttack29DRefusedTokensGoDownTheQueueInOrder: a bucket of 2 at 1/s
// (a call may wait 3 s for a token) in front of a bulkhead of 1 permit
// (a call may wait 90 ms). H takes a token and the permit and is held at
// the server; A takes the last token and waits for the permit; B and C,
// 30 ms apart, queue for tokens the refill would bring in 1 s and 2 s.
// A is refused by the bulkhead at 90 ms: its token goes to B, the next in
// the queue, at once; B is refused 90 ms later and its token goes to C;
// C is refused and its token goes back to the bucket. So B and C each
// end about 90 ms after the one before, in the order they came, well
// before their refill (C under 600 ms, not 2 s). No token is made
// either: once H is released, D gets the one token the bucket holds and
// E (100 ms deadline) is refused by the rate limit at once. The server
// sees H and D.
//
// The same with the bulkhead's wait cut by the caller instead: X, of a
// cached GetStock, leaves its shared call (its 50 ms deadline) while the
// call waits for the permit H holds; the call is abandoned, ends its
// wait, and its token goes back: once H is released, a caller of another
// key gets a token at once and the server sees H and it.
func TestAttack29DRefusedTokensGoDownTheQueueInOrder(t *testing.T) {
	edit := func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1, Burst: 2, MaxWait: 3 * time.Second}
		p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 90 * time.Millisecond}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Hedging, m.Timeout, m.OverallTimeout = nil, nil, 5*time.Second, 0
	}
	type ending struct {
		name string
		err  error
		at   time.Duration
	}
	show := func(es []ending) string {
		out := ""
		for _, e := range es {
			out += fmt.Sprintf("%s %v at %v; ", e.name, status.Code(e.err), e.at.Round(time.Millisecond))
		}
		return out
	}

	t.Run("refused by the bulkhead", func(t *testing.T) {
		atkNoLeak(t)
		release := make(chan struct{})
		fs, cc := startFault(t, atk29dHoldTagged(release))
		readyConn(t, cc)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, edit)
		hDone := make(chan error, 1)
		go func() {
			_, err := c.GetStock(atk29dHeld(context.Background()), &inventoryv1.GetStockRequest{Sku: "h"})
			hDone <- err
		}()
		atkWaitFor(t, "H reaches the server", func() bool { return fs.Calls(atkGetStock) == 1 })
		start := time.Now()
		ends := make(chan ending, 3)
		for i, name := range []string{"A", "B", "C"} {
			if i > 0 {
				time.Sleep(30 * time.Millisecond)
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: name})
				ends <- ending{name, err, time.Since(start)}
			}()
		}
		var order []ending
		for range 3 {
			select {
			case e := <-ends:
				order = append(order, e)
			case <-time.After(4 * time.Second):
				t.Fatalf("A, B and C had not all ended after 4 s: %s", show(order))
			}
		}
		close(release)
		if err := <-hDone; err != nil {
			t.Fatalf("H, released: %v", err)
		}
		get := func(d time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "d"})
			return err
		}
		dErr := get(time.Second)
		eStart := time.Now()
		eErr := get(100 * time.Millisecond)
		eTook := time.Since(eStart)
		t.Logf("ends: %sD: %v; E: %v after %v", show(order), dErr, eErr, eTook.Round(time.Millisecond))
		for i, e := range order {
			if !errors.Is(e.err, runtime.ErrBulkheadFull) {
				t.Errorf("%s: %v, want the bulkhead's refusal", e.name, e.err)
			}
			if want := []string{"A", "B", "C"}[i]; e.name != want {
				t.Errorf("the %d-th to end was %s, want %s: the token given back goes to the next in the queue, in the order they came", i+1, e.name, want)
			}
		}
		if last := order[len(order)-1]; last.at > 600*time.Millisecond {
			t.Errorf("the last of A, B, C ended %v after A began; with each refused call's token passed on it is about 270 ms "+
				"(the refill alone would have C's token at 2 s)", last.at.Round(time.Millisecond))
		}
		if dErr != nil {
			t.Errorf("D, after C's token went back to the bucket: %v, want an answer", dErr)
		}
		if !errors.Is(eErr, runtime.ErrRateLimited) || eTook > 90*time.Millisecond {
			t.Errorf("E, right after D: %v after %v; want the rate limit's refusal at once (one token was left, D's)", eErr, eTook)
		}
		if n := fs.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2 (H and D)", n)
		}
	})

	t.Run("a cache's shared call left waiting for a permit", func(t *testing.T) {
		atkNoLeak(t)
		release := make(chan struct{})
		fs, cc := startFault(t, atk29dHoldTagged(release))
		readyConn(t, cc)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			edit(p)
			p.Bulkhead.MaxWait = time.Second
			atkMethod(p, atkGetStock).Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}
		})
		hDone := make(chan error, 1)
		go func() {
			_, err := c.GetStock(atk29dHeld(context.Background()), &inventoryv1.GetStockRequest{Sku: "h"})
			hDone <- err
		}()
		atkWaitFor(t, "H reaches the server", func() bool { return fs.Calls(atkGetStock) == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, xErr := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "x"})
		cancel()
		if status.Code(xErr) != codes.DeadlineExceeded {
			t.Fatalf("X, its shared call waiting for the permit H holds: %v, want DEADLINE_EXCEEDED at its deadline", xErr)
		}
		time.Sleep(20 * time.Millisecond) // the abandoned shared call ends its wait
		close(release)
		if err := <-hDone; err != nil {
			t.Fatalf("H, released: %v", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, yErr := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "y"})
		if yErr != nil {
			t.Errorf("Y, after X's abandoned shared call gave its token back: %v (ErrRateLimited: %v), want an answer",
				yErr, errors.Is(yErr, runtime.ErrRateLimited))
		}
		if n := fs.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2 (H and Y; X's abandoned call sent nothing)", n)
		}
	})
}

// TestAttack29DRetriedStormUnderRefusalsKeepsTheRate: README, Rate limit:
// "a token bucket on the calls the client sends to the dependency", and
// a call "holds one ... rate-limit token for all its attempts". A bucket
// of 4 at 40/s (a call may wait 100 ms) in front of a bulkhead of 2
// permits (a 5 ms wait), 24 callers in a loop for 600 ms, every call's
// first attempt failing UNAVAILABLE after 20 ms and its retry answering
// after 20 ms: the bulkhead, holding a call for both attempts, refuses
// many calls that took a token, each of which goes back. The calls the
// server sees (distinct calls, by a header of the caller's) must stay
// within 4 + 40 × the storm's length (+1), every one of them with both
// attempts on its one token; and the tokens given back must not be lost
// either: at least a third of that rate gets through.
func TestAttack29DRetriedStormUnderRefusalsKeepsTheRate(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	attempts := map[string]int{}
	fs, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		id := first(md.Get("x-call"))
		mu.Lock()
		attempts[id]++
		n := attempts[id]
		mu.Unlock()
		if err := server.Wait(ctx, 20*time.Millisecond); err != nil {
			return err
		}
		if n == 1 {
			return status.Error(codes.Unavailable, "injected, first attempt")
		}
		return nil
	})
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 40, Burst: 4, MaxWait: 100 * time.Millisecond}
		p.Bulkhead = &policy.Bulkhead{Permits: 2, MaxWait: 5 * time.Millisecond}
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Hedging, m.Timeout, m.OverallTimeout = nil, 2*time.Second, 0
		m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	})
	var seq, answered, bulkheadFull, rateLimited atomic.Int32
	took := atkStorm(24, 600*time.Millisecond, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-call", fmt.Sprint(seq.Add(1)))
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		switch {
		case err == nil:
			answered.Add(1)
		case errors.Is(err, runtime.ErrBulkheadFull):
			bulkheadFull.Add(1)
		case errors.Is(err, runtime.ErrRateLimited):
			rateLimited.Add(1)
			time.Sleep(time.Millisecond)
		default:
			t.Errorf("a call failed with %v", err)
		}
	})
	mu.Lock()
	calls, single := len(attempts), 0
	for _, n := range attempts {
		if n != 2 {
			single++
		}
	}
	mu.Unlock()
	most := 4 + int(took.Seconds()*40) + 1
	t.Logf("in %v: %d calls reached the server (%d attempts), allowed %d; %d answered, %d refused by the bulkhead, %d by the rate limit",
		took.Round(time.Millisecond), calls, fs.Calls(atkGetStock), most, answered.Load(), bulkheadFull.Load(), rateLimited.Load())
	if bulkheadFull.Load() == 0 {
		t.Fatal("the bulkhead refused no call: no token was given back, the test proves nothing")
	}
	if calls > most {
		t.Errorf("the server saw %d calls in %v; a bucket of 4 at 40/s allows %d", calls, took.Round(time.Millisecond), most)
	}
	if single != 0 {
		t.Errorf("%d calls reached the server with other than their 2 attempts", single)
	}
	if least := most / 3; calls < least {
		t.Errorf("the server saw %d calls in %v, under a third of the %d the bucket allows: tokens given back were lost", calls, took, most)
	}
}

// atk29dLateTimer is a context whose deadline is dl while its Done closes
// (and its Err turns) only later, at the inner context's end: the context
// of a loaded machine whose deadline's timer runs late, stretched so that
// a test can act in between (README, Order of the layers: a context is
// over once "its deadline passed, also before the context's timer has run
// and while its Err is still nil, as gRPC reads the deadline itself").
type atk29dLateTimer struct {
	context.Context
	dl time.Time
}

func (c atk29dLateTimer) Deadline() (time.Time, bool) { return c.dl, true }

// TestAttack29DPermitHandedPastTheDeadlineGivesTheTokenBack: README, Order
// of the layers: "A context that ends while the call waits for a token or
// a permit ends the wait the same way (the token is given back; a permit
// handed over just as the context ended is returned at once). A token
// already taken when the context then ends waiting for a permit ... goes
// back"; Bulkhead: a call "waits up to max_wait (and never past its own
// deadline)"; Deadlines: "a call ... whose deadline has passed is not
// handed to gRPC, which would refuse it unsent". A bucket of 2 at 0.5/s
// (no wait) in front of a bulkhead of 1 (300 ms wait) and a breaker that
// opens at half of 2 calls failing. H takes a token and the permit and is
// held at the server; X takes the last token and waits for the permit,
// its deadline 40 ms away, its context's timer late (Done at 400 ms). At
// 80 ms H is released and its permit handed to X, past X's deadline,
// while X's Err is still nil. X is over: it must not be sent, the breaker
// must count nothing of it, and its token must go back, so that Y, right
// after, finds it.
func TestAttack29DPermitHandedPastTheDeadlineGivesTheTokenBack(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, atk29dHoldTagged(release))
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.AdaptiveLimit, p.ClientThrottle = nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.5, Burst: 2}
		p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 300 * time.Millisecond}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second, CoolDown: 10 * time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Hedging, m.Timeout, m.OverallTimeout = nil, nil, 5*time.Second, 0
	})
	hDone := make(chan error, 1)
	go func() {
		_, err := c.GetStock(atk29dHeld(context.Background()), &inventoryv1.GetStockRequest{Sku: "h"})
		hDone <- err
	}()
	atkWaitFor(t, "H reaches the server", func() bool { return fs.Calls(atkGetStock) == 1 })

	start := time.Now()
	inner, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	late := atk29dLateTimer{Context: inner, dl: start.Add(40 * time.Millisecond)}
	type result struct {
		err  error
		took time.Duration
	}
	xDone := make(chan result, 1)
	go func() {
		_, err := c.GetStock(late, &inventoryv1.GetStockRequest{Sku: "x"})
		xDone <- result{err, time.Since(start)}
	}()
	time.Sleep(80 * time.Millisecond)
	xErrNil := late.Err() == nil
	close(release)
	if err := <-hDone; err != nil {
		t.Fatalf("H, released: %v", err)
	}
	x := <-xDone
	state, _ := c.Runtime().BreakerState(atkGetStock)
	ctx, cancelY := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelY()
	_, yErr := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "y"})
	t.Logf("X: %v after %v (its deadline 40 ms, its Err nil at 80 ms: %v); the breaker then %v; Y: %v; the server saw %d calls",
		x.err, x.took.Round(time.Millisecond), xErrNil, state, yErr, fs.Calls(atkGetStock))
	if !xErrNil {
		t.Skip("X's context had ended by 80 ms: the test proves nothing")
	}
	if status.Code(x.err) != codes.DeadlineExceeded {
		t.Errorf("X: %v, want DEADLINE_EXCEEDED", x.err)
	}
	if x.took > 70*time.Millisecond {
		t.Errorf("X waited for the permit %v, past its 40 ms deadline (the bulkhead waits never past a call's deadline)", x.took.Round(time.Millisecond))
	}
	if state != runtime.StateClosed {
		t.Errorf("the breaker is %v after X: X, over before it was sent, was counted a failure of the dependency", state)
	}
	if yErr != nil {
		t.Errorf("Y: %v (ErrRateLimited: %v, ErrCircuitOpen: %v); want an answer on the token X, never sent, gave back",
			yErr, errors.Is(yErr, runtime.ErrRateLimited), errors.Is(yErr, runtime.ErrCircuitOpen))
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (H and Y)", n)
	}
}
