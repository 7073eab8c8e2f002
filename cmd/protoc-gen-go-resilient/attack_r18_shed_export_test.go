package main

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestAttackR18ShedPushbackThroughServiceConfig: a caller in another
// language loads the exported service config of the example inventory
// service and calls GetStock (3 attempts on UNAVAILABLE, 50 ms initial
// backoff) on a server whose Guard is shedding it. The Guard refuses in its
// tap, which can answer only a status: the pushback travels as a
// google.rpc.RetryInfo detail, which gRPC's built-in retry does not read
// (it honours only the grpc-retry-pushback-ms trailer). Counted at the
// Guard:
//
//   - shed with RESOURCE_EXHAUSTED, as the example annotates: one attempt,
//     the refusal is final for every caller;
//   - shed with UNAVAILABLE (the code a Shedding that sets none gets): the
//     service config's caller makes all three attempts, the last well
//     before the 500 ms pushback, while the generated client, which reads
//     RetryInfo, waits it out. The README's service config section says so
//     and says which code to shed with.
func TestAttackR18ShedPushbackThroughServiceConfig(t *testing.T) {
	sc, err := os.ReadFile("../../example/gen/example/inventory/v1/inventory.service_config.json")
	if err != nil {
		t.Fatal(err)
	}
	const svc = "example.inventory.v1.InventoryService"
	for _, tc := range []struct {
		name     string
		code     codes.Code // the shedding code; OK keeps the annotation's
		want     codes.Code
		attempts uint64
	}{
		{"RESOURCE_EXHAUSTED, as annotated", codes.OK, codes.ResourceExhausted, 1},
		{"UNAVAILABLE, the default", codes.Unavailable, codes.Unavailable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := server.NewGuard(rserver.WithPolicy(svc, func(p *policy.Server) {
				p.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
				if tc.code != codes.OK {
					p.Shedding.Code = tc.code
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
				if c.Method == inventoryv1.InventoryService_ReserveStock_FullMethodName {
					select { // holds the one place in flight
					case <-release:
					case <-ctx.Done():
					}
				}
				return nil
			}, g.ServerOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(release)

			plain := dialWithServiceConfig(t, srv.Addr(), string(sc))
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _ = inventoryv1.NewInventoryServiceClient(plain).ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "hold", Sku: "a", Units: 1})
			}()
			for {
				if st, _ := g.Stats(svc); st.InFlight == 1 {
					break
				}
				time.Sleep(time.Millisecond)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err = inventoryv1.NewInventoryServiceClient(plain).GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
			took := time.Since(start)
			st, _ := g.Stats(svc)
			shed := st.Shed[rserver.PriorityNormal]
			// gRPC-Go 1.85 sometimes ends a call whose retries ran out
			// against a refusal made before the request was read with
			// "max retries exhausted: … EOF" (code Unknown) rather than
			// the last status: the attempts are what is counted here.
			if err == nil || shed != tc.attempts {
				t.Errorf("GetStock through the service config: %v after %d attempts shed, want %v after %d", err, shed, tc.want, tc.attempts)
			}
			// The refusal itself, on a channel without retries.
			_, err = inventoryv1.NewInventoryServiceClient(dialWithServiceConfig(t, srv.Addr(), "{}")).GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
			d, ok := runtime.Pushback(err, nil)
			if status.Code(err) != tc.want || !ok || d != 500*time.Millisecond {
				t.Errorf("the refusal: %v, pushback %v %v; want %v with the annotated 500ms in its RetryInfo", err, d, ok, tc.want)
			}
			if tc.attempts > 1 && took >= d {
				t.Errorf("%d attempts took %s: gRPC's retry waited out the %s pushback, which the README says it does not", shed, took, d)
			}
		})
	}
}

// TestAttackR18DoNotRetryThroughServiceConfig: the README says the
// Guard's do-not-retry mark (the handler's dependency failed after the
// runtime's own retries) is the trailer grpc-retry-pushback-ms: -1,
// honoured by gRPC-Go's built-in retry. A plain grpc-go channel loaded
// with the exported service config, whose GetStock retries UNAVAILABLE 3
// times, must then make one attempt when the handler's UNAVAILABLE is
// marked, and all three when it is not.
func TestAttackR18DoNotRetryThroughServiceConfig(t *testing.T) {
	sc, err := os.ReadFile("../../example/gen/example/inventory/v1/inventory.service_config.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		marked   bool
		attempts int
	}{
		{"marked do-not-retry", true, 1},
		{"not marked", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := server.NewGuard()
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.Start("127.0.0.1:0", func(context.Context, server.Call) error {
				err := status.Error(codes.Unavailable, "the dependency is down, retried below")
				if tc.marked {
					err = rserver.DoNotRetry(err)
				}
				return err
			}, g.ServerOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			plain := dialWithServiceConfig(t, srv.Addr(), string(sc))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = inventoryv1.NewInventoryServiceClient(plain).GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
			// Retries run out, gRPC-Go may wrap the last error ("max
			// retries exhausted"): the attempts are what is counted.
			n := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName)
			if err == nil || n != tc.attempts || (tc.marked && status.Code(err) != codes.Unavailable) {
				t.Errorf("%v after %d attempts, want UNAVAILABLE after %d", err, n, tc.attempts)
			}
		})
	}
}
