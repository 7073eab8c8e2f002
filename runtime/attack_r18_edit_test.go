package runtime_test

// Attack on WithPolicy's "edits a deep copy of the annotated policy before
// the client is built; the result is validated": an edit that keeps the
// pointer it was given (a configuration library that stashes it, to
// "reload" later) and writes through it once the client is built. The
// client runs the policy it validated and derived its hot path from; a
// later write reaches nothing it uses.

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttackR18AnEditsKeptPointerChangesNothingOnceBuilt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(p *policy.Service) // through the kept pointer, after NewClient
	}{
		{"fewer attempts", func(p *policy.Service) { atkMethod(p, atkGetStock).Retry.MaxAttempts = 1 }},
		// Validate refuses both; the hot path was derived from a retry.
		{"retry taken away", func(p *policy.Service) { atkMethod(p, atkGetStock).Retry = nil }},
		{"no retryable code", func(p *policy.Service) { atkMethod(p, atkGetStock).Retry.RetryableCodes = 0 }},
		{"another name", func(p *policy.Service) { atkMethod(p, atkGetStock).Name = "/elsewhere/GetStock" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := startFault(t, server.Fail(codes.Unavailable))
			// Connected first: at load 8 the first call's attempt timed
			// out (the annotated 300 ms) while the connection was dialled.
			readyConn(t, cc)
			var kept *policy.Service
			for _, opt := range []func(func(*policy.Service)) runtime.Option{
				runtime.WithPolicy,
				func(f func(*policy.Service)) runtime.Option { return runtime.WithPolicyFrom("reloader", f) },
			} {
				c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
					opt(func(p *policy.Service) { kept = p }),
				}}, func(p *policy.Service) {
					p.Breaker = nil
					m := atkMethod(p, atkGetStock)
					m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
				})
				want, wantDesc := c.Runtime().Policy(), c.Runtime().Describe()
				tc.write(kept)

				before := fs.Calls(atkGetStock)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if status.Code(err) != codes.Unavailable {
					t.Errorf("got %v, want UNAVAILABLE", err)
				}
				if n := fs.Calls(atkGetStock) - before; n != 3 {
					t.Errorf("the server saw %d attempts, want the 3 the client was built with", n)
				}
				if got := c.Runtime().Describe(); got != wantDesc {
					t.Errorf("Describe changed after a write through the edit's pointer:\n got %s\nwant %s", got, wantDesc)
				}
				if got := c.Runtime().Policy(); !reflect.DeepEqual(got, want) {
					t.Errorf("the policy in force changed after a write through the edit's pointer:\n got %+v\nwant %+v", got, want)
				}
			}
		})
	}
}
