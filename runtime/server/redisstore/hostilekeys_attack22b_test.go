package redisstore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack22bHostileKeysOnRedis: keys that HTTP/2 would not carry from
// a gRPC-Go client but that a raw client, a proxy or an in-process caller
// may hand the Guard: "0", a NUL, a RESP command smuggled after CRLF,
// bytes that are not UTF-8, 255 bytes of 0xFF, a glob and a cluster hash
// tag. Each is a key of its own on a real Redis: the handler runs once
// for it, a repeat is replayed, another body with it is refused with
// INVALID_ARGUMENT, keys one byte apart never share an entry, and nothing
// but the store's own entries is written.
func TestAttack22bHostileKeysOnRedis(t *testing.T) {
	r := startRedis(t)
	rc := client(t, r.addr)
	g, err := server.NewGuard([]*policy.Server{reserveStockPolicy(time.Second, policy.StoreErrorRefuse)},
		server.WithStore(New(rc, "hostile:")))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	handler := func(ctx context.Context, req any) (any, error) {
		runs.Add(1)
		return &inventoryv1.ReserveStockResponse{ReservationId: req.(*inventoryv1.ReserveStockRequest).GetOrderId()}, nil
	}
	call := func(key, order string) (*inventoryv1.ReserveStockResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(runtime.IdempotencyKeyHeader, key))
		resp, err := g.UnaryInterceptor(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "a", Units: 1},
			&grpc.UnaryServerInfo{FullMethod: reserveStock}, handler)
		if err != nil {
			return nil, err
		}
		return resp.(*inventoryv1.ReserveStockResponse), nil
	}
	keys := []string{"0", "\x00", "a\r\nSET smuggled 1\r\n", "\xff\xfe", strings.Repeat("\xff", server.MaxKeyLength), "*", "{slot}", "k y", "k y "}
	for i, key := range keys {
		order := "o-" + string(rune('a'+i))
		for attempt := range 2 {
			resp, err := call(key, order)
			if err != nil || resp.GetReservationId() != order {
				t.Fatalf("key %q, attempt %d: %v, %v; want the answer for %s", key, attempt+1, resp, err, order)
			}
		}
		if n := runs.Load(); n != int64(i+1) {
			t.Fatalf("key %q: %d runs so far, want %d (one per key)", key, n, i+1)
		}
		if _, err := call(key, "another"); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("key %q with another body: %v; want INVALID_ARGUMENT", key, err)
		}
	}
	got, err := rc.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got {
		if !strings.HasPrefix(k, "hostile:") {
			t.Errorf("Redis holds %q, written outside the store's prefix", k)
		}
	}
	if len(got) != len(keys) {
		t.Errorf("Redis holds %d keys, want one per idempotency key (%d)", len(got), len(keys))
	}
}
