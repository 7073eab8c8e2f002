package example_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

// TestAttack22bStopLeavesNoKeyHeld: the example server, its Guard on
// Redis, is stopped as example/cmd/server stops on a deploy's SIGINT
// (Shutdown with a grace, then main returns)
// while ReserveStock runs past the grace; the handler honours its context
// and returns 150 ms after it is cancelled (a database call winding
// down). gRPC's Stop alone closes the connections and returns without
// waiting for the handlers, so the process would exit with the key still
// pending in Redis: every retry of that order, on every replica, would
// wait (or be refused) for 3/2 Lease, 15 s by default, for a request that
// never committed. Shutdown returns once each handler returned and the
// Guard released its key.
func TestAttack22bStopLeavesNoKeyHeld(t *testing.T) {
	rdb := e2eRedis(t)
	g, err := server.NewGuard(rserver.WithStore(redisstore.New(rdb, "e2e22b:")))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var once sync.Once
	b := func(ctx context.Context, c server.Call) error {
		if c.Method != reserveStock {
			return nil
		}
		once.Do(func() { close(started) })
		<-ctx.Done()
		time.Sleep(150 * time.Millisecond)
		return status.FromContextError(ctx.Err()).Err()
	}
	opts := g.ServerOptions()
	srv, err := server.Start("127.0.0.1:0", b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, "o-stop")
		_, err := inventoryv1.NewInventoryServiceClient(cc).ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-stop", Sku: "a", Units: 1})
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(3 * time.Second):
		t.Fatal("the handler did not start")
	}
	srv.Shutdown(50 * time.Millisecond)
	// The process would exit here.
	held, err := rdb.Keys(context.Background(), "e2e22b:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if len(held) != 0 {
		t.Fatalf("when Shutdown returned, Redis held %q: the key of a request that never committed, pending past the process's end", held)
	}
}
