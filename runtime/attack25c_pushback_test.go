package runtime_test

// Attacks on the pushback promises (README, "Pushback") through a real
// server's grpc-retry-pushback-ms trailer: the values gRPC's own retry
// reads as a whole number (strconv.Atoi), and those it does not; a 0
// that replaces a long backoff; a pushback that delays a hedged copy
// past its delay, or sends it at once.

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25cPushbackSpellings: a value gRPC's retry reads as a whole
// number ("+5", "-0", "007") is a pushback of that many milliseconds,
// retried after it; anything else (spaces, a unit, a non-ASCII digit, a
// sign alone, two numbers in one value) is not a whole number and stops
// the retries, as a negative value does. Two clients tell the three
// readings apart: one whose backoff (5 s) is past the call's 3 s
// deadline makes its retries only when the pushback replaced the
// backoff; one whose backoff is 1 ms makes them unless the pushback
// stopped them.
func TestAttack25cPushbackSpellings(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	client := func(backoff time.Duration) *inventoryv1.InventoryServiceResilientClient {
		return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			p.Breaker = nil
			m := atkMethod(p, atkGetStock)
			m.Retry.InitialBackoff, m.Retry.MaxBackoff = backoff, backoff
			m.Timeout, m.OverallTimeout = 2*time.Second, 0 // none a loaded machine reaches
		})
	}
	long, short := client(5*time.Second), client(time.Millisecond)
	for _, tc := range []struct {
		value string
		calls int // 3: a pushback, retried after it; 1: stopped
	}{
		{"+5", 3}, {"-0", 3}, {"007", 3}, {"+0", 3},
		{" 5", 1}, {"5 ", 1}, {"5ms", 1}, {"\u0665", 1}, {"-", 1}, {"+", 1}, {"1,2", 1}, {"1 2", 1}, {"--1", 1}, {"-5", 1},
	} {
		t.Run(tc.value, func(t *testing.T) {
			fs.SetBehaviour(atkPushback(tc.value))
			for _, c := range []struct {
				name string
				c    *inventoryv1.InventoryServiceResilientClient
			}{{"5 s backoff", long}, {"1 ms backoff", short}} {
				before := fs.Calls(atkGetStock)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := c.c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if status.Code(err) != codes.Unavailable {
					t.Errorf("%s: got %v, want UNAVAILABLE", c.name, err)
				}
				if got := fs.Calls(atkGetStock) - before; got != tc.calls {
					t.Errorf("pushback %q, %s: the server saw %d calls, want %d", tc.value, c.name, got, tc.calls)
				}
			}
		})
	}
}

// TestAttack25cPushbackOfAHedgedCall: a hedged call's copy that fails
// with a non-fatal code and a pushback of 0 has the next copy sent at
// once, though the hedging delay is long; with a pushback of 300 ms the
// next copy waits 300 ms, where a failure without one sends it at once.
func TestAttack25cPushbackOfAHedgedCall(t *testing.T) {
	atkNoLeak(t)
	for _, tc := range []struct {
		value    string // "" for no pushback
		atLeast  time.Duration
		atMost   time.Duration
		wantCall int
	}{
		{value: "0", atMost: 500 * time.Millisecond, wantCall: 2},
		{value: "", atMost: 500 * time.Millisecond, wantCall: 2},
		{value: "300", atLeast: 300 * time.Millisecond, atMost: 1500 * time.Millisecond, wantCall: 2},
	} {
		t.Run("pushback "+tc.value, func(t *testing.T) {
			var mu sync.Mutex
			var arrivals []time.Time
			fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
				if call.N > 1 {
					return nil
				}
				if tc.value != "" {
					if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, tc.value)); err != nil {
						return err
					}
				}
				return status.Error(codes.Unavailable, "first copy fails")
			})
			readyConn(t, cc)
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker = nil
				m := atkMethod(p, atkGetStock)
				m.Retry = nil
				m.Timeout, m.OverallTimeout = 4*time.Second, 0
				m.Hedging = &policy.Hedging{Delay: 3 * time.Second, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
				t.Fatalf("the second copy answers: got %v", err)
			}
			if got := fs.Calls(atkGetStock); got != tc.wantCall {
				t.Fatalf("the server saw %d copies, want %d", got, tc.wantCall)
			}
			mu.Lock()
			gap := arrivals[1].Sub(arrivals[0])
			mu.Unlock()
			if gap < tc.atLeast || gap > tc.atMost {
				t.Errorf("pushback %q: the second copy came %v after the first, want %v to %v (the hedging delay is 3s)",
					tc.value, gap, tc.atLeast, tc.atMost)
			}
		})
	}
}

// TestAttack25cPushbackWithoutADeadlineWaitsUntilCancelled: "a call
// without a deadline waits it out, or until cancelled": a pushback of an
// hour on a call without a deadline neither retries at once nor ends the
// call; the caller's cancel ends it with CANCELLED, never the attempt's
// UNAVAILABLE, after one call.
func TestAttack25cPushbackWithoutADeadlineWaitsUntilCancelled(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, atkPushback("3600000"))
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Timeout, m.OverallTimeout = 0, 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		done <- err
	}()
	atkWaitFor(t, "the first attempt", func() bool { return fs.Calls(atkGetStock) == 1 })
	select {
	case err := <-done:
		t.Fatalf("the call ended during the hour's pushback: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Errorf("got %v, want CANCELLED", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end on its caller's cancel")
	}
	if got := fs.Calls(atkGetStock); got != 1 {
		t.Errorf("the server saw %d calls, want 1", got)
	}
}
