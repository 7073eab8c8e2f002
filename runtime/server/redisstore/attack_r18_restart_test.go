package redisstore

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18RedisRestartBeforeOutcome: Redis restarts, empty, after the
// handler committed (the charge is made) and before its outcome is
// written. No other request holds the key: it is simply gone. Answering
// the caller UNAVAILABLE ("lost its hold on the idempotency key") makes
// its client retry at once with the same key, which finds the key free
// and runs the handler a second time: the restart turned into a charge
// made twice, for certain. The Guard claims the key again (it is free, so
// no other request can be running with it) and keeps the outcome: the
// caller gets its answer, and its retry the replay. The handler runs once.
func TestAttackR18RedisRestartBeforeOutcome(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	var srv *reserver
	srv = &reserver{answer: "a", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		if srv.runs.Load() == 1 {
			restartRedis(t, r) // the handler's effect is made; its entry is lost
		}
		return nil
	}}
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(retryingClient(t, r.addr), "restartout:")))

	first, err := reserve(t, c, "ro-1", 5*time.Second)
	if err != nil || first.GetReservationId() != "a-1" {
		t.Errorf("the caller whose handler committed before the restart: %q %v, want its answer a-1", first.GetReservationId(), err)
	}
	// The client's retry (after an error) or any later repeat.
	again, err := reserve(t, c, "ro-1", 5*time.Second)
	if err != nil || again.GetReservationId() != "a-1" {
		t.Errorf("the repeat: %q %v, want the replay of a-1", again.GetReservationId(), err)
	}
	if n := srv.commits.Load(); n != 1 {
		t.Errorf("the handler committed %d times, want 1", n)
	}
	if s := stats(t, g); s.Replayed != 1 || s.NotKept != 0 {
		t.Errorf("stats %+v: want the outcome kept and replayed once", s)
	}
}

// TestAttackR18LostLeaseThenKeyFreed: replica A is partitioned from Redis
// for longer than its lease while its handler (one that ignores its
// context) runs; B takes the key over, and its handler fails transiently,
// which frees the key. A's handler then commits. When A writes its
// outcome the entry is gone and the key is free: A claims it again and
// keeps its outcome, the only effect made, so A's caller gets its answer
// and B's caller, retrying, the replay. A key another request holds is
// never written over (TestLeaseLostCancelsHandler).
func TestAttackR18LostLeaseThenKeyFreed(t *testing.T) {
	const lease = 300 * time.Millisecond
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	started, partitionOver := make(chan struct{}), make(chan struct{})
	a := &reserver{answer: "a", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		close(started)
		<-partitionOver
		return nil
	}}
	b := &reserver{answer: "b", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		return status.Error(codes.Unavailable, "B's dependency is down")
	}}
	ga, ca := guarded(t, a, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "freed:")))
	_, cb := guarded(t, b, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "freed:")))
	first := make(chan *inventoryv1.ReserveStockResponse, 1)
	go func() {
		resp, err := reserve(t, ca, "f-1", 5*time.Second)
		if err != nil {
			t.Errorf("A's caller: %v, want A's answer (its outcome kept once the key was free)", err)
		}
		first <- resp
	}()
	<-started
	p.Stall() // A's partition, past its lease
	if _, err := reserve(t, cb, "f-1", 3*time.Second); status.Code(err) != codes.Unavailable {
		t.Fatalf("B, which took the key over and failed: %v, want its UNAVAILABLE", err)
	}
	p.Restore()
	close(partitionOver)
	got := <-first
	if got.GetReservationId() != "a-1" {
		t.Errorf("A's caller: %q, want a-1", got.GetReservationId())
	}
	again, err := reserve(t, cb, "f-1", time.Second)
	if err != nil || again.GetReservationId() != "a-1" {
		t.Errorf("B's caller retrying: %q %v, want the replay of a-1", again.GetReservationId(), err)
	}
	if a.commits.Load() != 1 || b.runs.Load() != 1 || b.commits.Load() != 0 {
		t.Errorf("A committed %d, B ran %d and committed %d; want 1, 1, 0", a.commits.Load(), b.runs.Load(), b.commits.Load())
	}
	if s := stats(t, ga); s.LeasesLost != 1 {
		t.Errorf("A's stats %+v, want its lease counted lost", s)
	}
}
