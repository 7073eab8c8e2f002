package bench

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// grpcClient starts the example server on loopback and returns a client of
// impl connected to it, after one call so the connection is up.
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
	case "plain":
		c = inventoryv1.NewInventoryServiceClient(cc)
	case "resilient":
		c, err = inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
			Runtime: []runtime.Option{runtime.WithPolicy(func(p *runtime.ServicePolicy) {
				// The annotated policy, but a bulkhead that the parallel
				// runs never fill: what is measured is its cost, not its
				// refusals.
				p.Bulkhead.Permits = 1 << 20
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
	return c
}

var grpcImpls = []string{"plain", "resilient"}

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
				resp, err := c.GetStock(ctx, request)
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
					if _, err := c.GetStock(ctx, request); err != nil {
						fail.add(err)
					}
				}
			})
		})
	}
}
