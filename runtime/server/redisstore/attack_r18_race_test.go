package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// TestAttackR18ClaimAnswerNeverArrives: replica A's claim is carried out
// by Redis, but its answer is held past go-redis's read timeout, so it
// never arrives: the Guard stopped waiting (go-redis gave up at its read
// timeout, before StoreTimeout) and refused the request, and its late
// release, which needs the answer, is never sent. The key stays pending under a token nobody
// holds. A repeat on replica B, which reaches Redis directly, races it:
// it must neither run while the dead claim may still be a live request's
// nor wait longer than the entry's 3/2 Lease; then it runs once, and A's
// caller, retrying, gets B's answer. A's handler never runs.
func TestAttackR18ClaimAnswerNeverArrives(t *testing.T) {
	const lease = 600 * time.Millisecond
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	ra := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = ra.Close() })
	a, b := &reserver{answer: "a"}, &reserver{answer: "b"}
	sa := New(ra, "deadclaim:")
	ga, ca := guarded(t, a, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(sa))
	gb, cb := guarded(t, b, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "deadclaim:")))
	loadScripts(t, sa)

	p.DelayReplies(600 * time.Millisecond) // past the read timeout: the answer never arrives
	start := time.Now()
	_, err := reserve(t, ca, "dc-1", 800*time.Millisecond)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("A, whose claim answer never arrives: %v, want UNAVAILABLE (the store did not answer)", err)
	}
	p.DelayReplies(0)

	resp, err := reserve(t, cb, "dc-1", 3*time.Second)
	took := time.Since(start)
	if err != nil || resp.GetReservationId() != "b-1" {
		t.Fatalf("B's repeat: %q %v, want it run on B (b-1)", resp.GetReservationId(), err)
	}
	// The dead claim's entry lives 3/2 Lease from when Redis carried it
	// out; polling adds at most 100 ms.
	if limit := lease*3/2 + 100*time.Millisecond + 400*time.Millisecond; took > limit {
		t.Errorf("B ran %s after A's claim, want within %s: the dead claim held the key past its entry", took, limit)
	}
	if st := stats(t, gb); st.Waited != 1 {
		t.Errorf("B stats %+v: want it to have waited for the dead claim, once", st)
	}
	again, err := reserve(t, ca, "dc-1", 2*time.Second)
	if err != nil || again.GetReservationId() != "b-1" {
		t.Errorf("A's caller retrying: %q %v, want B's answer b-1", again.GetReservationId(), err)
	}
	if a.runs.Load() != 0 || b.runs.Load() != 1 {
		t.Errorf("runs: A %d, B %d; want 0 and 1", a.runs.Load(), b.runs.Load())
	}
	if st := stats(t, ga); st.StoreErrors == 0 || st.Replayed != 1 {
		t.Errorf("A stats %+v: want the store error counted and the retry replayed", st)
	}
}
