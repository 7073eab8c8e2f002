package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

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
