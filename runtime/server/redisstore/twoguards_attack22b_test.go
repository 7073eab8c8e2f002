package redisstore

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// TestAttack22bTwoGuardsOnOneRedisPrefix: a library's Guard and the
// service's own, chained on one server, each given a store of its own
// made with redisstore.New on one client and one prefix: one keyspace.
// The inner Guard found the outer's claim pending and the request waited
// for itself until its deadline; it passes the request on instead, the
// handler runs once, and the repeat is replayed.
func TestAttack22bTwoGuardsOnOneRedisPrefix(t *testing.T) {
	r := startRedis(t)
	rc := client(t, r.addr)
	p := reserveStockPolicy(time.Second, policy.StoreErrorRefuse)
	g1, err := server.NewGuard([]*policy.Server{p}, server.WithStore(New(rc, "idem:")))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := server.NewGuard([]*policy.Server{p}, server.WithStore(New(rc, "idem:")))
	if err != nil {
		t.Fatal(err)
	}
	srv := &reserver{answer: "two"}
	c := serveInventory(t, srv, grpc.InTapHandle(g1.TapHandle), grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))
	first, err := reserve(t, c, "o-two", time.Second)
	if err != nil {
		t.Fatalf("first request: %v; want the handler's answer", err)
	}
	again, err := reserve(t, c, "o-two", time.Second)
	if err != nil || again.GetReservationId() != first.GetReservationId() {
		t.Fatalf("repeat: %v, %v; want the replay of %q", again, err, first.GetReservationId())
	}
	if n := srv.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.Replayed != 1 || s2.Waited != 0 {
		t.Errorf("outer replayed %d, inner waited %d; want 1 and 0", s1.Replayed, s2.Waited)
	}
}
