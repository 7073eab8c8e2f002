package example_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/tcpproxy"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

// storeRig is the example behind its Guard whose Redis is reached through
// a TCP proxy, called by the generated client directly.
type storeRig struct {
	srv    *server.Server
	guard  *rserver.Guard
	redis  *tcpproxy.Proxy
	client *inventoryv1.InventoryServiceResilientClient
}

func newStoreRig(t *testing.T, b server.Behaviour) *storeRig {
	t.Helper()
	direct := e2eRedis(t)
	p := tcpproxy.Start(t, direct.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	g, err := server.NewGuard(rserver.WithStore(redisstore.New(rdb, "e2e:")))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start("127.0.0.1:0", b, append(g.ServerOptions(), grpc.WaitForHandlers(true))...) // Stop waits for the handlers, as in newRig
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	_, c := dialInventory(t, srv.Addr(), nil)
	return &storeRig{srv: srv, guard: g, redis: p, client: c}
}

// TestAttackR18eSlowStoreUnderClientRetries: Redis answers 120 ms late
// (a claim, with go-redis's script load and a new connection's handshake,
// takes about the attempt's 300 ms), while Redis carries out every late
// claim. Four callers of one order at once: the handler runs at most once
// while Redis is slow, every caller gets the reservation, UNAVAILABLE
// naming the store, or DEADLINE_EXCEEDED by its attempt's timeout (a store
// that answers within StoreTimeout is slow, not unreachable: the Guard
// waits for it until the request's deadline, ON_STORE_ERROR_REFUSE), and
// once Redis is quick the order runs (or is replayed) without waiting for
// a claim nobody holds.
func TestAttackR18eSlowStoreUnderClientRetries(t *testing.T) {
	r := newStoreRig(t, nil)
	if _, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
		t.Fatal(err)
	}
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-slowstore", Sku: "a", Units: 1}
	r.redis.DelayReplies(120 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := r.client.ReserveStock(ctx, req)
			if err == nil && resp.GetReservationId() != "r-o-slowstore" {
				t.Errorf("a caller got %q", resp.GetReservationId())
			}
			if c := status.Code(err); err != nil && c != codes.Unavailable && c != codes.DeadlineExceeded {
				t.Errorf("a caller while Redis is slow: %v, want the answer, UNAVAILABLE or DEADLINE_EXCEEDED", err)
			}
		}()
	}
	wg.Wait()
	during := r.srv.Calls(reserveStock)
	if during > 1 {
		t.Errorf("the handler ran %d times for one key while Redis was slow, want at most 1", during)
	}
	r.redis.DelayReplies(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := r.client.ReserveStock(ctx, req)
	if err != nil || resp.GetReservationId() != "r-o-slowstore" {
		t.Errorf("the order once Redis is quick: %v, %v (after %v); want its reservation", resp, err, time.Since(start))
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times in all, want 1", n)
	}
	s, _ := r.guard.Stats(inventoryName)
	t.Logf("ran %d while slow; stats %+v; last call %v", during, s, time.Since(start))
	if s.InFlight != 0 {
		t.Errorf("a place is still held: %+v", s)
	}
}
