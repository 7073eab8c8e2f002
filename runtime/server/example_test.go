package server_test

import (
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// The policy a generated file would hold for the example inventory
// service, and a server guarded by it.
func ExampleNewGuard() {
	inventory := policy.Server{
		Name: "example.inventory.v1.InventoryService",
		Shedding: &policy.Shedding{
			Limits:   policy.Limits{Low: 30, Normal: 60, High: 90, Critical: 120},
			Pushback: 2 * time.Second,
		},
		Methods: []policy.ServerMethod{{
			Name:           "/example.inventory.v1.InventoryService/GetStock",
			Priority:       server.PriorityHigh,
			MinDeadline:    20 * time.Millisecond,
			DefaultTimeout: 300 * time.Millisecond,
		}, {
			Name:        "/example.inventory.v1.InventoryService/ReserveStock",
			Priority:    server.PriorityCritical,
			Dedup:       &policy.Dedup{TTL: 24 * time.Hour, OnStoreError: policy.StoreErrorRefuse},
			NewResponse: func() proto.Message { return new(inventoryv1.ReserveStockResponse) },
		}},
	}
	g, err := server.NewGuard([]*policy.Server{&inventory},
		// Several replicas: redisstore.New(redis.NewClient(…), "inventory:idem:").
		server.WithStore(server.NewMemoryStore(100_000)),
		// An operator's override, validated like the annotations.
		server.WithPolicy(inventory.Name, func(p *policy.Server) { p.Shedding.Limits.Low = 10 }))
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer(append(runtime.ServerOptions(), g.ServerOptions()...)...)
	defer s.Stop()
	// inventoryv1.RegisterInventoryServiceServer(s, impl); s.Serve(lis)
	fmt.Println(len(g.ServerOptions()), "server options")
	// Output: 3 server options
}

// A handler whose database stayed down through its own retries tells its
// callers not to retry.
func ExampleDoNotRetry() {
	err := server.DoNotRetry(status.Error(codes.Unavailable, "ledger database unavailable after 3 attempts"))
	fmt.Println(status.Code(err), server.IsDoNotRetry(err))
	d, _ := runtime.Pushback(err, nil)
	fmt.Println(d)
	// Output:
	// Unavailable true
	// -1ns
}
