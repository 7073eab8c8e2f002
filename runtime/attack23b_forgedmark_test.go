package runtime_test

// Attack on the Guard's refusal marks as the client's adaptive layers
// read them (4e0d82b): a server that is not a Guard of this project sends
// the marks on codes and in orders a Guard never does. Only the Guard's
// mark on its own code may be counted as nothing ("Only the Guard's mark
// is honoured: that reason in that domain, wherever it is among the
// details"), by the breaker, the adaptive limit and the throttler alike;
// anything else is the dependency's failure, counted by its code.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack23bMarked fails every call with code and the ErrorInfo details
// of the given reasons, in that order, in domain.
func attack23bMarked(code codes.Code, domain string, reasons ...string) server.Behaviour {
	return func(context.Context, server.Call) error {
		st := status.New(code, "attack23b: marked by a server that is not a Guard")
		for _, r := range reasons {
			var err error
			if st, err = st.WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: r}); err != nil {
				return err
			}
		}
		return st.Err()
	}
}

// TestAttack23bOnlyTheGuardsMarkOnItsCodeIsHonoured: a plain server
// fails GetStock with a refusal mark. The client has an adaptive limit
// of 8, a throttler and a breaker that opens on one failure, the codes
// the server sends among its failure codes. A mark the Guard sends
// (DEADLINE_TOO_SHORT on DEADLINE_EXCEEDED, SHED on UNAVAILABLE or
// RESOURCE_EXHAUSTED), also beside the other mark in either order, is
// counted as nothing by the breaker, which stays closed; the too-short
// mark by the adaptive layers too (three calls all reach the server, the
// limit stays 8, the throttler refuses nothing), where a shed is a drop.
// Any other (a mark on another code, of another domain) is a failure:
// after the first call the throttler's refusal probability is above 0,
// the breaker open, and the limit below 8, but for an UNAVAILABLE, which
// without the shed mark says the dependency is failing, not overloaded,
// and leaves the limit. Before, the last mark among the
// details hid the other: SHED then DEADLINE_TOO_SHORT on UNAVAILABLE
// opened the breaker, DEADLINE_TOO_SHORT then SHED on DEADLINE_EXCEEDED
// halved the limit and fed the throttler.
func TestAttack23bOnlyTheGuardsMarkOnItsCodeIsHonoured(t *testing.T) {
	const (
		short = runtime.DeadlineReason
		shed  = runtime.ShedReason
		ours  = runtime.DoNotRetryDomain
	)
	for _, tc := range []struct {
		code    codes.Code
		domain  string
		reasons []string
		// breaker: the breaker counts it as nothing (the Guard's mark on
		// its code); adaptive: the adaptive layers do too (the too-short
		// mark only: a shedding server is loaded, which they must see).
		breaker, adaptive bool
	}{
		{codes.DeadlineExceeded, ours, []string{short, runtime.DoNotRetryReason}, true, true},
		{codes.DeadlineExceeded, ours, []string{short, shed}, true, true},
		{codes.DeadlineExceeded, ours, []string{shed, short}, true, true},
		{codes.Unavailable, ours, []string{shed}, true, false},
		{codes.Unavailable, ours, []string{shed, short}, true, false},
		{codes.Unavailable, ours, []string{short, shed}, true, false},
		{codes.ResourceExhausted, ours, []string{short, shed}, true, false},
		{codes.ResourceExhausted, ours, []string{shed, short}, true, false},
		{codes.DeadlineExceeded, ours, []string{shed}, false, false},
		{codes.Unavailable, ours, []string{short}, false, false},
		{codes.ResourceExhausted, ours, []string{short}, false, false},
		{codes.DeadlineExceeded, "example.com", []string{short}, false, false},
		{codes.DeadlineExceeded, ours, nil, false, false},
	} {
		t.Run(fmt.Sprintf("%v %v %s", tc.code, tc.reasons, tc.domain), func(t *testing.T) {
			atkNoLeak(t)
			srv, cc := startFault(t, attack23bMarked(tc.code, tc.domain, tc.reasons...))
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
			}, func(p *policy.Service) {
				p.Bulkhead = nil
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 8, InitialLimit: 8,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
				p.ClientThrottle = &policy.Throttle{K: 2, Window: 10 * time.Second, MaxRefusal: 0.9}
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second, CoolDown: time.Minute,
					HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted)}
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.Retry = 2*time.Second, nil
			})
			calls := 1 // a layer that counts the failure may refuse the next
			if tc.breaker && tc.adaptive {
				calls = 3
			}
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if status.Code(err) != tc.code {
					t.Fatalf("GetStock %d: %v, want the server's %v", i, err, tc.code)
				}
			}
			if n := srv.Calls(atkGetStock); n != calls {
				t.Fatalf("the server saw %d calls, want %d", n, calls)
			}
			limit := gaugeValue(t, reg, "resilient_client_adaptive_limit")
			p := gaugeValue(t, reg, "resilient_client_throttle_refusal_probability")
			state, _ := c.Runtime().BreakerState(atkGetStock)
			want := runtime.StateOpen
			if tc.breaker {
				want = runtime.StateClosed
			}
			if state != want {
				t.Errorf("breaker %v, want %v (the Guard's mark on its code %v)", state, want, tc.breaker)
			}
			if tc.adaptive && (limit != 8 || p != 0) {
				t.Errorf("the Guard's too-short mark: limit %v, throttle probability %v; want 8, 0 (counted as nothing)", limit, p)
			}
			// An UNAVAILABLE without the Guard's shed mark says the
			// dependency is down or failing, not overloaded: no drop for
			// the limit, a request not accepted for the throttler.
			plainUnavailable := tc.code == codes.Unavailable && !tc.breaker
			switch {
			case !tc.adaptive && plainUnavailable && (limit != 8 || p == 0):
				t.Errorf("an UNAVAILABLE the Guard did not mark shed: limit %v, throttle probability %v; want 8 (no drop), above 0", limit, p)
			case !tc.adaptive && !plainUnavailable && (limit >= 8 || p == 0):
				t.Errorf("not the Guard's too-short mark: limit %v, throttle probability %v; want below 8, above 0 (a drop)", limit, p)
			}
		})
	}
}
