package runtime_test

// The feature-pair matrix, the server's Guard × the client's adaptive
// layers: the Guard refuses a request that leaves less than its method's
// MinDeadline with DEADLINE_EXCEEDED marked DEADLINE_TOO_SHORT, which the
// client's breaker counts as nothing ("the caller's time was short, and
// the service says nothing of its health by it": one caller's tight
// deadlines would otherwise cut off its client's other callers). The
// adaptive limit and the throttler are shared by the client's unary
// methods as the breaker is; the same refusal must not halve the one nor
// feed the other's refusals.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// attack23mGuarded serves the example behind its Guard, GetStock's
// MinDeadline raised to 3 s (far above the 1 s its callers leave, so that
// a refusal reaches the caller before its own deadline even on a loaded
// machine), and dials it.
func attack23mGuarded(t *testing.T) (*server.Server, *rserver.Guard, string) {
	t.Helper()
	g, err := server.NewGuard(rserver.WithPolicy("example.inventory.v1.InventoryService", func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == atkGetStock {
				p.Methods[i].MinDeadline = 3 * time.Second
				p.Methods[i].DefaultTimeout = 5 * time.Second
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start("127.0.0.1:0", server.Healthy, append(runtime.ServerOptions(), g.ServerOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, g, srv.Addr()
}

// TestAttack23mTooShortRefusalsLeaveTheAdaptiveLayersAlone: one caller
// sends 30 GetStock with 1 s deadlines to a healthy, idle server whose
// Guard refuses each as too short. The client has an adaptive limit of 8
// and a throttler, shared with ReserveStock. Each refusal must be the
// Guard's DEADLINE_EXCEEDED (none refused on the client), the limit must
// stay 8 and the throttler refuse nothing; then 8 ReserveStock with ample
// time, all held by the server at once, are all admitted. Plain and
// retrying GetStock (whose attempt reads the mark with the pushback).
func TestAttack23mTooShortRefusalsLeaveTheAdaptiveLayersAlone(t *testing.T) {
	for _, retrying := range []bool{false, true} {
		t.Run(fmt.Sprint("retrying ", retrying), func(t *testing.T) {
			atkNoLeak(t)
			srv, _, addr := attack23mGuarded(t)
			reg := prometheus.NewRegistry()
			c := atkInventory(t, dialFault(t, addr), inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
			}, func(p *policy.Service) {
				p.Bulkhead = &policy.Bulkhead{Permits: 8, MaxWait: 20 * time.Millisecond}
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 8, InitialLimit: 8,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
				p.ClientThrottle = &policy.Throttle{K: 2, Window: 10 * time.Second, MaxRefusal: 0.9}
				p.Breaker = nil
				m := atkMethod(p, atkGetStock)
				m.Timeout = 2 * time.Second
				m.Retry = nil
				if retrying {
					m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
						Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
				}
				r := atkMethod(p, atkReserveStock)
				r.Timeout, r.Retry = 2*time.Second, nil
			})
			for i := range 30 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)})
				cancel()
				if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrThrottled) || errors.Is(err, runtime.ErrConcurrencyLimited) {
					t.Fatalf("GetStock %d with 1 s left: %v, want the Guard's DEADLINE_EXCEEDED", i, err)
				}
			}
			if n := srv.Calls(atkGetStock); n != 0 {
				t.Fatalf("the handler ran %d GetStock, want none (each refused as too short)", n)
			}
			if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l != 8 {
				t.Errorf("adaptive limit %v after 30 too-short refusals of a healthy server, want 8", l)
			}
			if p := gaugeValue(t, reg, "resilient_client_throttle_refusal_probability"); p != 0 {
				t.Errorf("throttle refusal probability %v after 30 too-short refusals, want 0", p)
			}
			release := make(chan struct{})
			srv.SetBehaviour(atkHold(release))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs := make(chan error, 8)
			for i := range 8 {
				go func() {
					_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: fmt.Sprint("o", i), Sku: "a", Units: 1})
					errs <- err
				}()
			}
			atkWaitFor(t, "8 ReserveStock at the server, or one refused", func() bool {
				return srv.Calls(atkReserveStock) == 8 || len(errs) > 0
			})
			close(release)
			for range 8 {
				if err := <-errs; err != nil {
					t.Errorf("ReserveStock with ample time after one caller's too-short GetStocks: %v, want served", err)
				}
			}
			if n := srv.Calls(atkReserveStock); n != 8 {
				t.Errorf("the server saw %d ReserveStock, want 8", n)
			}
			atkWantNoPermits(t, c.Runtime(), atkReserveStock, "after every call returned")
		})
	}
}
