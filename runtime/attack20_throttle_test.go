package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20ThrottlerForgetsTheOutageOnTheClientsClock: the throttler
// counts in the client's clock (WithClock), so its recovery is a state
// machine a test drives. 60 calls into an outage of a real server bring
// the refusals to the cap (within about ten attempts, then at most one in
// ten goes out); with the server healthy again and the fake clock two
// windows on, the window has forgotten the outage, and every one of 50
// calls reaches the server: no refusal lingers past what the README says
// ("the refusals fade out over about two windows"), while right after
// the recovery, the clock unmoved, calls are still refused.
func TestAttack20ThrottlerForgetsTheOutageOnTheClientsClock(t *testing.T) {
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	clk := newFakeClock()
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker = nil
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Methods[0].Retry = nil
		// Each call is one attempt; a healthy server's answer must not
		// meet the attempt's 300 ms on a loaded machine (-race, load 13
		// did): the throttler is what is tested, not the timeout.
		p.Methods[0].Timeout, p.Methods[0].OverallTimeout = 10*time.Second, 0
	}, runtime.WithClock(clk))
	throttled := 0
	for range 60 {
		if _, err := getStockOf(context.Background(), c); errors.Is(err, runtime.ErrThrottled) {
			throttled++
		} else if err == nil {
			t.Fatal("an answer from a server that is down")
		}
	}
	outage := srv.Calls(getStock)
	// At most ~10 to reach the cap, then a tenth of the other 50 (with
	// room for the draw: 0.1 × 50 = 5, and P(more than 15 of 50) is tiny).
	if outage > 25 || throttled < 35 {
		t.Errorf("outage: %d of 60 calls reached the server, %d throttled; want at most 25 and at least 35", outage, throttled)
	}
	srv.SetBehaviour(server.Healthy)
	// The clock not moved, the window still holds the outage: of 5 calls
	// some are refused (all 5 pass with a chance under 1e-4).
	early := 0
	for range 5 {
		if _, err := getStockOf(context.Background(), c); errors.Is(err, runtime.ErrThrottled) {
			early++
		}
	}
	if early == 0 {
		t.Errorf("no call refused right after the outage with the clock unmoved: the throttler does not count on the client's clock")
	}
	outage = srv.Calls(getStock)
	clk.Advance(2*time.Second + time.Millisecond)
	for i := range 50 {
		if _, err := getStockOf(context.Background(), c); err != nil {
			t.Fatalf("call %d after the recovery and two windows: %v, want every call to reach the server", i+1, err)
		}
	}
	if n := srv.Calls(getStock) - outage; n != 50 {
		t.Errorf("after the recovery the server saw %d of 50 calls", n)
	}
}

// TestAttack20ThrottlerCountsAttemptsTheCallersDeadlineEnded: the
// README's throttler counts as accepts the attempts the dependency
// answered, "any code but DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
// UNAVAILABLE", and leaves out only "an attempt the caller cancelled".
// Against a hung server, callers whose own deadline (30 ms) is shorter
// than the attempt's timeout (300 ms, so no context of the attempt's own
// is made) end every attempt with DEADLINE_EXCEEDED: the breaker counts
// each as a failure ("the dependency did not answer in the time it had"),
// and the throttler must count each as a request not accepted and, after
// about ten, refuse most of the rest (at most 1 in 10 goes out). 10
// callers × 12 calls: at most 10 + 0.1 × 110 + room for the draw reach
// the hung server, instead of all 120.
func TestAttack20ThrottlerCountsAttemptsTheCallersDeadlineEnded(t *testing.T) {
	srv, cc := startFault(t, server.Hang)
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.ClientThrottle = &policy.Throttle{Window: time.Minute}
		p.Methods[0].Timeout, p.Methods[0].Retry = 300*time.Millisecond, nil
	})
	var throttled atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 12 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
				_, err := getStockOf(ctx, c)
				cancel()
				switch {
				case errors.Is(err, runtime.ErrThrottled):
					throttled.Add(1)
				case status.Code(err) != codes.DeadlineExceeded:
					t.Errorf("call on a hung server: %v, want DEADLINE_EXCEEDED or ErrThrottled", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("server saw %d, throttled %d", srv.Calls(getStock), throttled.Load())
	if n := srv.Calls(getStock); n > 40 {
		t.Errorf("%d of 120 calls reached the hung server (%d throttled): the throttler did not count the attempts the callers' deadlines ended", n, throttled.Load())
	}
}
