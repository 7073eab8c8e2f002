package redisstore

import (
	"context"
	"testing"
	"time"

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
