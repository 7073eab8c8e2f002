package redisstore

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// attack22dReplica serves srv behind outer's and inner's interceptors,
// chained, and returns a client of it.
func attack22dReplica(t *testing.T, srv inventoryv1.InventoryServiceServer, outer, inner *server.Guard) inventoryv1.InventoryServiceClient {
	t.Helper()
	s := grpc.NewServer(grpc.InTapHandle(outer.TapHandle), grpc.ChainUnaryInterceptor(outer.UnaryInterceptor, inner.UnaryInterceptor))
	inventoryv1.RegisterInventoryServiceServer(s, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close(); s.Stop(); <-done })
	return inventoryv1.NewInventoryServiceClient(cc)
}

// TestAttack22dOuterGuardOnAnotherStoreKeepsRedisDedup: two replicas,
// each with a Guard on a MemoryStore of its own outside the service's
// Guard on one real Redis. The inner Guard passed on every key the outer
// held: Redis never saw the key, and the repeat on the other replica ran
// the handler again. It passes on only a key its own store holds for
// the request (one Redis, one prefix); here it claims the key on Redis,
// and the repeat is replayed from there. With the two Guards on one Redis
// under two prefixes (two keyspaces) each keeps the key in its own.
func TestAttack22dOuterGuardOnAnotherStoreKeepsRedisDedup(t *testing.T) {
	r := startRedis(t)
	rc := client(t, r.addr)
	p := reserveStockPolicy(time.Second, policy.StoreErrorRefuse)
	guard := func(s server.Store) *server.Guard {
		g, err := server.NewGuard([]*policy.Server{p}, server.WithStore(s))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	t.Run("memory outside, Redis inside, two replicas", func(t *testing.T) {
		srv := &reserver{answer: "replicas"}
		inners := []*server.Guard{guard(New(rc, "idem:")), guard(New(rc, "idem:"))}
		a := attack22dReplica(t, srv, guard(server.NewMemoryStore(10)), inners[0])
		b := attack22dReplica(t, srv, guard(server.NewMemoryStore(10)), inners[1])
		first, err := reserve(t, a, "o-replicas", 2*time.Second)
		if err != nil {
			t.Fatalf("first request, replica a: %v", err)
		}
		again, err := reserve(t, b, "o-replicas", 2*time.Second)
		if err != nil {
			t.Fatalf("repeat, replica b: %v", err)
		}
		if n := srv.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times over the two replicas, want 1", n)
		}
		if again.GetReservationId() != first.GetReservationId() {
			t.Errorf("repeat answered %q, want the replay of %q", again.GetReservationId(), first.GetReservationId())
		}
		if s := stats(t, inners[1]); s.Replayed != 1 {
			t.Errorf("replica b's Redis Guard replayed %d, want 1", s.Replayed)
		}
	})

	t.Run("two prefixes on one Redis", func(t *testing.T) {
		srv := &reserver{answer: "prefixes"}
		outer, inner := guard(New(rc, "lib:")), guard(New(rc, "svc:"))
		c := attack22dReplica(t, srv, outer, inner)
		first, err := reserve(t, c, "o-prefixes", 2*time.Second)
		if err != nil {
			t.Fatalf("first request: %v", err)
		}
		again, err := reserve(t, c, "o-prefixes", 2*time.Second)
		if err != nil || again.GetReservationId() != first.GetReservationId() {
			t.Fatalf("repeat: %v, %v; want the replay of %q", again, err, first.GetReservationId())
		}
		if n := srv.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
		for _, prefix := range []string{"lib:", "svc:"} {
			keys, err := rc.Keys(context.Background(), prefix+"*").Result()
			if err != nil || len(keys) != 1 {
				t.Errorf("keys under %q: %v, %v; want the request's", prefix, keys, err)
			}
		}
		if s1, s2 := stats(t, outer), stats(t, inner); s1.Replayed != 1 || s2.Waited != 0 {
			t.Errorf("outer replayed %d, inner waited %d; want 1 and 0", s1.Replayed, s2.Waited)
		}
	})
}
