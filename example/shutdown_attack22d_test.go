package example_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

// TestAttack22dShutdownKeepsTheOutcomeOfACallInFlight: Shutdown(grace)
// on a server whose Guard keeps ReserveStock's keys on a real Redis, with
// one keyed call in flight. A call that finishes within the grace has its
// outcome kept: a replica on the same Redis replays it without running
// its handler. A handler that ignores its context (it sleeps 300 ms
// after its cancellation) holds Shutdown past the grace until it
// returns, as documented, and leaves no key pending either.
func TestAttack22dShutdownKeepsTheOutcomeOfACallInFlight(t *testing.T) {
	rdb := e2eRedis(t)
	reserve := func(cc *grpc.ClientConn, order string, d time.Duration) (*inventoryv1.ReserveStockResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, order)
		return inventoryv1.NewInventoryServiceClient(cc).ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "a", Units: 1})
	}
	start := func(prefix string, b server.Behaviour) (*server.Server, *grpc.ClientConn) {
		g, err := server.NewGuard(rserver.WithStore(redisstore.New(rdb, prefix)))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.Start("127.0.0.1:0", b, g.ServerOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close(); srv.Stop() })
		return srv, cc
	}

	t.Run("finished within the grace", func(t *testing.T) {
		var runs atomic.Int32
		started := make(chan struct{}, 1)
		b := func(ctx context.Context, c server.Call) error {
			if c.Method != reserveStock {
				return nil
			}
			runs.Add(1)
			started <- struct{}{}
			return server.Wait(ctx, 200*time.Millisecond)
		}
		srv, cc := start("e2e22d-a:", b)
		done := make(chan error, 1)
		go func() { _, err := reserve(cc, "o-grace", 5*time.Second); done <- err }()
		<-started
		begin := time.Now()
		srv.Shutdown(5 * time.Second)
		if err := <-done; err != nil {
			t.Fatalf("the call in flight at Shutdown: %v, want its answer (it ends within the grace)", err)
		}
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("Shutdown took %s for a call of 200 ms", took)
		}
		_, replica := start("e2e22d-a:", b)
		resp, err := reserve(replica, "o-grace", 5*time.Second)
		if err != nil || resp.GetReservationId() != "r-o-grace" {
			t.Fatalf("the repeat on a replica: %v, %v; want the kept r-o-grace", resp, err)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1: the outcome kept at Shutdown is replayed", n)
		}
	})

	t.Run("a handler that ignores its context", func(t *testing.T) {
		started := make(chan struct{})
		var returned atomic.Int64
		b := func(ctx context.Context, c server.Call) error {
			if c.Method != reserveStock {
				return nil
			}
			close(started)
			<-ctx.Done()
			time.Sleep(300 * time.Millisecond) // deaf to its cancellation
			returned.Store(time.Now().UnixNano())
			return nil
		}
		srv, cc := start("e2e22d-b:", b)
		done := make(chan error, 1)
		go func() { _, err := reserve(cc, "o-deaf", 5*time.Second); done <- err }()
		<-started
		srv.Shutdown(50 * time.Millisecond)
		end := time.Now().UnixNano()
		if r := returned.Load(); r == 0 || r > end {
			t.Fatalf("Shutdown returned before the handler did")
		}
		// The process would exit here: no entry of the key may be pending
		// (a value "p…": a claim), which every retry would wait out.
		keys, err := rdb.Keys(context.Background(), "e2e22d-b:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if v, err := rdb.Get(context.Background(), k).Result(); err != nil || len(v) == 0 || v[0] == 'p' {
				t.Errorf("when Shutdown returned, Redis held %s = %.1q…, %v: a claim pending past the process's end", k, v, err)
			}
		}
		<-done
	})
}
