package redisstore

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack24dScopeAndKeyDoNotMerge: the store key joins the scope and
// the idempotency key; scopes and keys that join to the same text in a
// naive "scope:key" ("a:b" + "c" and "a" + "b:c", a scope ending where a
// key with the separator begins, scopes with newlines, NULs, a length
// prefix of their own and hash tags) are
// each a key of their own on Redis: every pair runs its handler once,
// and its repeat is replayed its own answer.
func TestAttack24dScopeAndKeyDoNotMerge(t *testing.T) {
	addr := startRedis(t).addr
	srv := &reserver{answer: "s"}
	scope := func(ctx context.Context) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return strings.Join(md.Get("tenant-bin"), ""), nil
	}
	_, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse),
		server.WithStore(New(client(t, addr), "scope:")), server.WithKeyScope(scope))
	pairs := [][2]string{
		{"a:b", "c"}, {"a", "b:c"}, {"a:b:c", "x"}, {"", "a:b:c"}, {"1:a", "b"}, {"1", "a:b"},
		{"t\n", "k"}, {"t", "k"}, {"t\x00", "k"}, {"3:a\r\nb", "c"}, {"{t}", "k"}, {"{t", "}k"}, {"3:abc", ""}, {"a b", "c"}, {"a", " b c"},
	}
	send := func(tenant, key string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "tenant-bin", tenant)
		// One body for every pair: only the scope and the key tell them apart.
		r, err := reserveWithCtx(ctx, c, key, "order-1")
		return r.GetReservationId(), err
	}
	firsts := map[[2]string]string{}
	for _, p := range pairs {
		if p[1] == "" {
			continue // no key: not deduplicated
		}
		id, err := send(p[0], p[1])
		if err != nil {
			t.Fatalf("scope %q key %q: %v", p[0], p[1], err)
		}
		firsts[p] = id
	}
	for _, p := range pairs {
		if p[1] == "" {
			continue
		}
		id, err := send(p[0], p[1])
		if err != nil || id != firsts[p] {
			t.Errorf("scope %q key %q repeated: %q %v, want its own answer %q", p[0], p[1], id, err, firsts[p])
		}
	}
	if n, want := srv.runs.Load(), int64(len(firsts)); n != want {
		t.Errorf("the handler ran %d times for %d scope and key pairs, want once each", n, want)
	}
}

// TestAttack24dLongestTTLOnRedis: a TTL of the longest Duration (292
// years) is sent to Redis as 9223372036854 ms, which Redis takes: the
// outcome is kept (not refused as an invalid expire time, which would
// leave the key to lapse and a repeat to run again) with that TTL.
func TestAttack24dLongestTTLOnRedis(t *testing.T) {
	addr := startRedis(t).addr
	srv := &reserver{answer: "ttl"}
	p := reserveStockPolicy(time.Second, policy.StoreErrorRefuse)
	p.Methods[0].Dedup.TTL = math.MaxInt64
	g, c := guarded(t, srv, p, server.WithStore(New(client(t, addr), "ttl:")))
	for i := range 2 {
		if r, err := reserve(t, c, "ttl-1", 5*time.Second); err != nil || r.GetReservationId() != "ttl-1" {
			t.Fatalf("attempt %d: %q %v, want ttl-1", i+1, r.GetReservationId(), err)
		}
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if s := stats(t, g); s.NotKept != 0 || s.StoreErrors != 0 || s.Replayed != 1 {
		t.Errorf("stats %+v: want the outcome kept and replayed", s)
	}
	pttl := client(t, addr).PTTL(context.Background(), "ttl:"+reserveStock+":0::ttl-1").Val()
	if want := time.Duration(math.MaxInt64).Truncate(time.Millisecond) - time.Minute; pttl < want {
		t.Errorf("the kept entry's TTL is %s, want about %s", pttl, time.Duration(math.MaxInt64))
	}
}

// reserveWithCtx sends ReserveStock with ctx and key, for order.
func reserveWithCtx(ctx context.Context, c inventoryv1.InventoryServiceClient, key, order string) (*inventoryv1.ReserveStockResponse, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
	return c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "a", Units: 1})
}
