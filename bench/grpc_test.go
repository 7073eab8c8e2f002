package bench

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// grpcClient starts the example server on loopback and returns a client of
// impl connected to it, after one call so the connection is up. When the
// benchmark ends it checks that every iteration reached the server: a
// figure for calls that never left would be meaningless.
func grpcClient(b *testing.B, impl string) inventoryv1.InventoryServiceClient {
	b.Helper()
	srv, err := server.Start("127.0.0.1:0", server.Healthy)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	var c inventoryv1.InventoryServiceClient
	switch impl {
	case "plain", "plain-timeout":
		c = inventoryv1.NewInventoryServiceClient(cc)
	case "resilient":
		c, err = inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
			Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
				// The annotated policy, but a bulkhead and a rate limit
				// that the parallel runs never fill (what is measured is
				// their cost, not their refusals), and without GetStock's
				// cache, which would answer without calling.
				p.Bulkhead.Permits = 1 << 20
				if p.RateLimit != nil {
					p.RateLimit.RequestsPerSecond = 1e9
					p.RateLimit.Burst = 1 << 20
				}
				for i := range p.Methods {
					p.Methods[i].Cache = nil
				}
			})},
		})
		if err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatalf("unknown impl %q", impl)
	}
	if _, err := c.GetStock(context.Background(), request); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if got := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); got < b.N {
			b.Errorf("%s: the server saw %d calls for %d iterations", impl, got, b.N)
		}
	})
	return c
}

// grpcImpls: the plain client alone; the plain client with the 300 ms
// context.WithTimeout a careful caller would add by hand (the fair
// baseline: a deadline costs allocations on both sides of the wire); the
// resilient client with the annotated policy.
var grpcImpls = []string{"plain", "plain-timeout", "resilient"}

// getStock calls c, inside a 300 ms timeout for plain-timeout.
func getStock(ctx context.Context, impl string, c inventoryv1.InventoryServiceClient) (*inventoryv1.GetStockResponse, error) {
	if impl != "plain-timeout" {
		return c.GetStock(ctx, request)
	}
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	return c.GetStock(ctx, request)
}

// BenchmarkGRPC is one real unary call over loopback gRPC to the example
// server, through the plain generated client and through the resilient
// one with its annotated policy (300 ms attempt timeout, three attempts,
// breaker, budget, bulkhead).
func BenchmarkGRPC(b *testing.B) {
	for _, impl := range grpcImpls {
		b.Run("mode=serial/impl="+impl, func(b *testing.B) {
			c := grpcClient(b, impl)
			ctx := context.Background()
			var fail failures
			defer fail.report(b)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := getStock(ctx, impl, c)
				if err != nil {
					fail.add(err)
				}
				sink = resp
			}
		})
	}
	for _, impl := range grpcImpls {
		b.Run("mode=parallel/impl="+impl, func(b *testing.B) {
			c := grpcClient(b, impl)
			var fail failures
			defer fail.report(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := getStock(ctx, impl, c); err != nil {
						fail.add(err)
					}
				}
			})
		})
	}
}
