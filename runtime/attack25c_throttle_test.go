package runtime_test

// Attacks on the client-side throttler's promises (README, "Client-side
// throttling"): what it counts as an accept, a request not accepted, or
// nothing, and the accept/request ratio k, read through the refusal
// probability gauge, which is deterministic where the refusals are random.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

const atk25cRefusalGauge = "resilient_client_throttle_refusal_probability"

// atk25cThrottled builds the inventory client with the throttler th alone
// (no breaker, no retry, no adaptive limit, no cache, no rate limit), on a
// clock that never moves, so that the window forgets nothing, and a
// registry to read its gauge from.
func atk25cThrottled(t *testing.T, cc *grpc.ClientConn, th policy.Throttle, edit func(m *policy.Method)) (*inventoryv1.InventoryServiceResilientClient, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithClock(newAtkClock()), runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.Bulkhead = nil, nil, nil
		p.ClientThrottle = &th
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Hedging = nil, nil
		// No attempt timeout a loaded machine could reach (the annotated
		// 300 ms cut a healthy call at load 15); a case sets its own.
		m.Timeout, m.OverallTimeout = 10*time.Second, 0
		if edit != nil {
			edit(m)
		}
	})
	return c, reg
}

// TestAttack25cThrottlerCountsWhatTheREADMESays: each way an attempt can
// end, followed by one UNAVAILABLE from the server. The gauge after that
// UNAVAILABLE tells what the first ending counted as: an accept leaves
// (2 − 2×1)/3 = 0, a request not accepted (2 − 0)/3 = 2/3, nothing 1/2.
// (The second attempt, at probability 1/2 after a request not accepted,
// may be refused locally: a refusal counts as a request, so the gauge is
// 2/3 either way.) The README: accepted is any code but
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and UNAVAILABLE, the server's
// CANCELLED included; a priority-shed refusal is the overload its code
// says; the Guard's DEADLINE_TOO_SHORT, the caller's cancellation and a
// message past a size limit count for nothing; the attempt's own timeout
// and the caller's deadline are requests not accepted.
func TestAttack25cThrottlerCountsWhatTheREADMESays(t *testing.T) {
	atkNoLeak(t)
	const (
		accept   = 0.0
		rejected = 2.0 / 3
		nothing  = 0.5
	)
	marked := func(code codes.Code, reason string) error {
		st, err := status.New(code, "marked").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: runtime.DoNotRetryDomain})
		if err != nil {
			panic(err)
		}
		return st.Err()
	}
	type ending struct {
		name string
		// first is the server's behaviour for the first call; the second
		// call always gets UNAVAILABLE.
		first server.Behaviour
		// call makes the first call (nil: a plain call without deadline).
		call func(c *inventoryv1.InventoryServiceResilientClient) error
		edit func(m *policy.Method)
		want float64
		// serverLimit is the server's receive limit, 0 for gRPC's.
		serverLimit int
	}
	var cases []ending
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		want := accept
		switch c {
		case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable:
			want = rejected
		}
		code := c
		cases = append(cases, ending{name: "server " + code.String(), want: want,
			first: func(context.Context, server.Call) error { return status.Error(code, "injected") }})
	}
	release := make(chan struct{})
	defer close(release)
	cases = append(cases,
		ending{name: "OK", first: server.Healthy, want: accept},
		ending{name: "shed UNAVAILABLE", want: rejected,
			first: func(context.Context, server.Call) error { return marked(codes.Unavailable, runtime.ShedReason) }},
		ending{name: "shed RESOURCE_EXHAUSTED", want: rejected,
			first: func(context.Context, server.Call) error { return marked(codes.ResourceExhausted, runtime.ShedReason) }},
		ending{name: "DEADLINE_TOO_SHORT", want: nothing,
			first: func(context.Context, server.Call) error {
				return marked(codes.DeadlineExceeded, runtime.DeadlineReason)
			}},
		ending{name: "the attempt's own timeout", want: rejected, first: atkHold(release),
			edit: func(m *policy.Method) { m.Timeout, m.OverallTimeout = 50*time.Millisecond, 0 }},
		ending{name: "the caller's deadline", want: rejected, first: atkHold(release),
			edit: func(m *policy.Method) { m.Timeout, m.OverallTimeout = 0, 0 },
			call: func(c *inventoryv1.InventoryServiceResilientClient) error {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				return err
			}},
		ending{name: "the caller's cancellation", want: nothing,
			edit: func(m *policy.Method) { m.Timeout, m.OverallTimeout = 0, 0 },
			first: func(ctx context.Context, _ server.Call) error {
				<-ctx.Done() // cancelled by the caller once the server has it
				return status.FromContextError(ctx.Err()).Err()
			},
			call: nil}, // set below: it needs the server
		ending{name: "a request past the send limit", want: nothing, first: server.Healthy,
			call: func(c *inventoryv1.InventoryServiceResilientClient) error {
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: string(make([]byte, 64))},
					grpc.MaxCallSendMsgSize(16))
				return err
			}},
		ending{name: "a response past the receive limit", want: nothing, first: server.Healthy,
			call: func(c *inventoryv1.InventoryServiceResilientClient) error {
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"},
					grpc.MaxCallRecvMsgSize(4))
				return err
			}},
		ending{name: "a request past the server's receive limit", want: nothing, first: server.Healthy, serverLimit: 16,
			call: func(c *inventoryv1.InventoryServiceResilientClient) error {
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: string(make([]byte, 64))})
				return err
			}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var serve []grpc.ServerOption
			if tc.serverLimit > 0 {
				serve = append(serve, grpc.MaxRecvMsgSize(tc.serverLimit))
			}
			fs, cc := startFaultWith(t, tc.first, serve)
			readyConn(t, cc)
			c, reg := atk25cThrottled(t, cc, policy.Throttle{}, tc.edit)
			call := tc.call
			if tc.name == "the caller's cancellation" {
				call = func(c *inventoryv1.InventoryServiceResilientClient) error {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					go func() {
						for fs.InFlight() == 0 && ctx.Err() == nil {
							time.Sleep(time.Millisecond)
						}
						cancel()
					}()
					_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
					return err
				}
			}
			if call == nil {
				call = func(c *inventoryv1.InventoryServiceResilientClient) error {
					_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
					return err
				}
			}
			err := call(c)
			if errors.Is(err, runtime.ErrThrottled) {
				t.Fatalf("the first call on an empty window was throttled: %v", err)
			}
			if tc.serverLimit > 0 || strings.Contains(tc.name, "limit") {
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("%s: got %v, want gRPC's RESOURCE_EXHAUSTED", tc.name, err)
				}
			}
			fs.SetBehaviour(func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "down") })
			_, err = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			if c := status.Code(err); c != codes.Unavailable {
				t.Fatalf("second call: %v, want UNAVAILABLE (the server's or the throttler's)", err)
			}
			if got := gaugeValue(t, reg, atk25cRefusalGauge); !near(got, tc.want) {
				t.Errorf("after %s then UNAVAILABLE: refusal probability %.4f, want %.4f (%s)", tc.name, got, tc.want, meaning(tc.want))
			}
		})
	}
}

func meaning(p float64) string {
	switch {
	case near(p, 0):
		return "the first counted as an accept"
	case near(p, 0.5):
		return "the first counted for nothing"
	}
	return "the first counted as a request not accepted"
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestAttack25cThrottlerRatioK: "while more than one attempt in k is
// accepted, nothing is refused". A server that answers one call in k and
// fails the k−1 others (UNAVAILABLE), the answer first, keeps the window
// at requests ≤ k × accepts: no attempt is refused, the server sees every
// call, the gauge stays 0. One more failure per round (one in k+1
// accepted) makes it positive after the first round, at exactly
// (k+1 − k)/(k+2).
func TestAttack25cThrottlerRatioK(t *testing.T) {
	atkNoLeak(t)
	for _, k := range []float64{2, 3} {
		t.Run(fmt.Sprintf("k=%g", k), func(t *testing.T) {
			per := int(k)
			fs, cc := startFault(t, func(_ context.Context, call server.Call) error {
				if (call.N-1)%per == 0 {
					return nil
				}
				return status.Error(codes.Unavailable, "one in k")
			})
			readyConn(t, cc)
			c, reg := atk25cThrottled(t, cc, policy.Throttle{K: k}, nil)
			const n = 60
			for i := range n {
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
				if errors.Is(err, runtime.ErrThrottled) {
					t.Fatalf("call %d throttled with one attempt in %g accepted: %v", i+1, k, err)
				}
				if p := gaugeValue(t, reg, atk25cRefusalGauge); p != 0 {
					t.Fatalf("after call %d: refusal probability %v, want 0", i+1, p)
				}
			}
			if got := fs.Calls(atkGetStock); got != n {
				t.Errorf("the server saw %d calls, want all %d", got, n)
			}
		})
		t.Run(fmt.Sprintf("k=%g, one fewer accept", k), func(t *testing.T) {
			per := int(k) + 1
			_, cc := startFault(t, func(_ context.Context, call server.Call) error {
				if (call.N-1)%per == 0 {
					return nil
				}
				return status.Error(codes.Unavailable, "one in k+1")
			})
			readyConn(t, cc)
			c, reg := atk25cThrottled(t, cc, policy.Throttle{K: k}, nil)
			for i := range per {
				if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); errors.Is(err, runtime.ErrThrottled) {
					t.Fatalf("call %d throttled before the window held more than k requests per accept", i+1)
				}
			}
			want := (float64(per) - k) / float64(per+1)
			if got := gaugeValue(t, reg, atk25cRefusalGauge); !near(got, want) {
				t.Errorf("after 1 accept in %d: refusal probability %v, want %v", per, got, want)
			}
		})
	}
}

// TestAttack25cThrottlerClimbsToTheCapInTenAttempts: "during an outage
// that begins on an empty window the probability climbs to the cap within
// about ten attempts". With nothing accepted, after n requests (sent or
// refused) it is n/(n+1): 0.9 at the ninth, and no further, whatever the
// draws; with max_refusal 0.5, at the first.
func TestAttack25cThrottlerClimbsToTheCapInTenAttempts(t *testing.T) {
	atkNoLeak(t)
	for _, capped := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("max_refusal %g", capped), func(t *testing.T) {
			fs, cc := startFault(t, func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "down") })
			readyConn(t, cc)
			c, reg := atk25cThrottled(t, cc, policy.Throttle{MaxRefusal: capped}, nil)
			limit := 0.9
			if capped != 0 {
				limit = capped
			}
			for n := 1; n <= 40; n++ {
				_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
				want := min(float64(n)/float64(n+1), limit)
				if got := gaugeValue(t, reg, atk25cRefusalGauge); !near(got, want) {
					t.Fatalf("after %d requests not accepted: refusal probability %v, want %v", n, got, want)
				}
			}
			if got := fs.Calls(atkGetStock); got < 1 || got > 35 {
				t.Errorf("the server saw %d of 40 calls at a refusal probability of %g", got, limit)
			}
		})
	}
}

// TestAttack25cThrottlerAfterAHealthySpell: "after a healthy spell the
// window's accepts must first be outnumbered k to one or forgotten, so it
// takes most of a window (at 100 attempts/s after 5 s of accepts, about
// 450 attempts, 4.5 s)". On the client's clock, 500 answers at 100/s, then
// an outage at 100 attempts/s. Every attempt of the outage, refused or
// sent, is a request not accepted, so the gauge follows the window
// whatever the draws: nothing is refused while the window's accepts are
// more than half its requests (the first 250 attempts at least), and the
// cap, 0.9, comes once the window has forgotten the healthy spell's last
// accepts, after about 450.
func TestAttack25cThrottlerAfterAHealthySpell(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	clock := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithClock(clock), runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.Bulkhead = nil, nil, nil
		p.ClientThrottle = &policy.Throttle{}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Hedging = nil, nil
		m.Timeout, m.OverallTimeout = 10*time.Second, 0 // see atk25cThrottled
	})
	get := func() error {
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		clock.Advance(10 * time.Millisecond)
		return err
	}
	for range 500 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	fs.SetBehaviour(func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "down") })
	firstPositive, atCap := 0, 0
	for n := 1; n <= 600 && atCap == 0; n++ {
		// Attempt n is at 5 s + (n−1) × 10 ms: up to the 250th (7.49 s)
		// the window holds at least half accepts; at the 251st (7.5 s) a
		// bucket of 50 accepts leaves it, and refusals may begin.
		if err := get(); errors.Is(err, runtime.ErrThrottled) && n <= 250 {
			t.Fatalf("attempt %d of the outage throttled, with the window's accepts still half its requests", n)
		}
		p := gaugeValue(t, reg, atk25cRefusalGauge)
		if p > 0 && firstPositive == 0 {
			firstPositive = n
		}
		if near(p, 0.9) {
			atCap = n
		}
	}
	if firstPositive < 250 {
		t.Errorf("refusals began at attempt %d of the outage, with the window's accepts still half its requests", firstPositive)
	}
	if atCap < 425 || atCap > 475 {
		t.Errorf("the cap came at attempt %d of the outage (refusals from %d), want about 450", atCap, firstPositive)
	}
	t.Logf("refusals from attempt %d, the cap at %d", firstPositive, atCap)
}
