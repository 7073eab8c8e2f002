package runtime_test

// The retry budget × the layers that refuse a repeat on the client's side
// (the open breaker, the adaptive limit, the bulkhead) × hedging with a
// delay shorter than a refusal takes to be read, and retries: README,
// Retries and the retry budget: the budget bounds what the dependency
// sees; a retry or a hedged copy is charged to it only when it goes to
// the dependency. One decided and then not sent (the open breaker or an
// adaptive layer refused it, or the call ended first) is given back.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack24bTinyHedge edits the inventory policy to a hedged GetStock whose
// delay is the shortest there is (1 ns: the second copy is mostly decided
// before the first copy's refusal is read), 2 copies, UNAVAILABLE
// non-fatal, and a budget of 5 retries (plus 1 % of the requests);
// ReserveStock is sent once (no retry), so that it can open the shared
// breaker or hold the shared limit without asking the budget.
func attack24bTinyHedge(p *policy.Service) *policy.Method {
	m := attack23mBare(p)
	m.Retry = nil
	m.Timeout = 3 * time.Second
	m.Hedging = &policy.Hedging{Delay: time.Nanosecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 5, Window: time.Minute}
	r := atkMethod(p, atkReserveStock)
	r.Retry = nil
	r.Timeout = 3 * time.Second
	return m
}

// TestAttack24bHedgedCopiesRefusedOnTheClientTakeNoBudget: 200 hedged
// calls whose every copy the client refuses itself (the open breaker, or
// the adaptive limit whose one place another call holds at the server),
// with a 1 ns delay: each call's second copy is decided, then refused.
// The server sees none of them, the budget still allows its 5 retries,
// and retries_total counts no budget refusal: no copy went to the
// dependency, so none may use up the budget the next real failure needs.
func TestAttack24bHedgedCopiesRefusedOnTheClientTakeNoBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(p *policy.Service)
		hold     bool // the server holds ReserveStock until the calls end
		sentinel error
		// setUp makes every copy refused: it opens the breaker, or holds
		// the limit's place; it returns what to call once the calls end.
		setUp func(t *testing.T, ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) func()
	}{
		{
			name: "by the open breaker",
			edit: func(p *policy.Service) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
					CoolDown: time.Hour, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			},
			sentinel: runtime.ErrCircuitOpen,
			setUp: func(t *testing.T, ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) func() {
				if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{Sku: "apple", Units: 1}); status.Code(err) != codes.Unavailable {
					t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
				}
				atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v, want open")
				return func() {}
			},
		},
		{
			name: "by the adaptive limit",
			edit: func(p *policy.Service) {
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
			},
			hold:     true,
			sentinel: runtime.ErrConcurrencyLimited,
			setUp: func(t *testing.T, ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) func() {
				held := make(chan error, 1)
				go func() {
					_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{Sku: "held", Units: 1})
					held <- err
				}()
				return func() {
					if err := <-held; status.Code(err) != codes.Unavailable {
						t.Errorf("the held ReserveStock: %v, want UNAVAILABLE", err)
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			srv, cc := startFault(t, func(ctx context.Context, call server.Call) error {
				if tc.hold && call.Method == atkReserveStock {
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				return status.Error(codes.Unavailable, "down")
			})
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
			}, func(p *policy.Service) {
				attack24bTinyHedge(p)
				tc.edit(p)
			})
			m := c.Runtime().MethodNamed24b(atkGetStock)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			finish := tc.setUp(t, ctx, c)
			atkWaitFor(t, "ReserveStock at the server", func() bool { return srv.Calls(atkReserveStock) == 1 })
			const calls = 200
			for i := range calls {
				if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); !errors.Is(err, tc.sentinel) {
					t.Fatalf("call %d: %v, want %v", i, err, tc.sentinel)
				}
			}
			close(release)
			finish()
			if n := srv.Calls(atkGetStock); n != 0 {
				t.Errorf("the server saw %d GetStock calls, want none", n)
			}
			if a := m.BudgetAvailable24b(); a != 5 {
				t.Errorf("the budget allows %d retries, want 5: charged for copies never sent", a)
			}
			got := atk22eSeries(t, reg)
			for _, k := range []string{
				"resilient_client_retries_total{method=GetStock,outcome=budget}",
				"resilient_client_retries_total{method=GetStock,outcome=hedge}",
			} {
				if got[k] != 0 {
					t.Errorf("%s = %v, want 0: no copy was sent", k, got[k])
				}
			}
		})
	}
}

// TestAttack24bRetryNotSentTakesNoBudget: a retried GetStock (2 attempts)
// against a server that fails it UNAVAILABLE. Its retry, decided, is not
// sent: the failure opened the breaker (1 call), or the caller cancelled
// during the pause (the server's pushback of 1 s). The server sees one call, and the budget
// still allows its 5 retries.
func TestAttack24bRetryNotSentTakesNoBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *policy.Service)
		// cancels: the caller cancels once the attempt failed.
		cancels bool
		want    func(err error) bool
	}{
		{
			name: "refused by the breaker",
			edit: func(p *policy.Service) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
					CoolDown: time.Hour, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			},
			want: func(err error) bool { return errors.Is(err, runtime.ErrCircuitOpen) },
		},
		{
			// The server's pushback of 1 s sets the pause: no draw.
			name:    "cancelled in the pause",
			edit:    func(p *policy.Service) {},
			cancels: true,
			want:    func(err error) bool { return status.Code(err) == codes.Canceled },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			b := server.Fail(codes.Unavailable)
			if tc.cancels {
				b = atkPushback("1000")
			}
			srv, cc := startFault(t, b)
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithClock(newAtkClock())},
			}, func(p *policy.Service) {
				m := attack23mBare(p)
				m.Timeout = 3 * time.Second
				m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
				p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 5, Window: time.Minute}
				tc.edit(p)
			})
			m := c.Runtime().MethodNamed24b(atkGetStock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.cancels {
				go func() {
					for srv.Calls(atkGetStock) == 0 && ctx.Err() == nil {
						time.Sleep(time.Millisecond)
					}
					// The attempt is answered at once; the pause of 1 s follows.
					time.Sleep(20 * time.Millisecond)
					cancel()
				}()
			}
			if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); !tc.want(err) {
				t.Fatalf("GetStock: %v", err)
			}
			if n := srv.Calls(atkGetStock); n != 1 {
				t.Errorf("the server saw %d calls, want 1", n)
			}
			if a := m.BudgetAvailable24b(); a != 5 {
				t.Errorf("the budget allows %d retries, want 5: charged for a retry never sent", a)
			}
		})
	}
}
