package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18ClaimAnswerNeverArrives: replica A's claim is carried out
// by Redis, but its answer is held past go-redis's read timeout, so it
// never arrives: the Guard stopped waiting (go-redis gave up at its read
// timeout, before StoreTimeout) and refused the request, and its late
// release, which needs the answer, is never sent. The key stays pending under a token nobody
// holds. A repeat on replica B, which reaches Redis directly, races it:
// it must neither run while the dead claim may still be a live request's
// nor wait longer than the entry's 3/2 Lease (read in Redis, so that a
// claim the loaded machine sent late does not count against B); then it runs once, and A's
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

	ran := make(chan time.Time, 1) // when B's handler ran
	b.hook = func(context.Context, *inventoryv1.ReserveStockRequest) error {
		select {
		case ran <- time.Now():
		default:
		}
		return nil
	}

	p.DelayReplies(600 * time.Millisecond) // past the read timeout: the answer never arrives
	_, err := reserve(t, ca, "dc-1", 800*time.Millisecond)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("A, whose claim answer never arrives: %v, want UNAVAILABLE (the store did not answer)", err)
	}
	p.DelayReplies(0)
	// The dead claim's entry, read in Redis itself: when it was carried out
	// depends on how late the loaded machine sent it, when it ends does
	// not (3/2 Lease after).
	direct := client(t, r.addr)
	var keys []string
	for end := time.Now().Add(time.Second); len(keys) == 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
		// (the proxy forwards the claim undelayed, but a loaded machine
		// may run its copy late)
		keys, err = direct.Keys(context.Background(), "deadclaim:*").Result()
	}
	if err != nil || len(keys) != 1 {
		t.Fatalf("the dead claim's entry in Redis: %q %v, want one key", keys, err)
	}
	// It ends between before+pttl and after+pttl+1ms (PTTL truncates to
	// the millisecond).
	before := time.Now()
	pttl, err := direct.PTTL(context.Background(), keys[0]).Result()
	after := time.Now()
	if err != nil || pttl <= 0 || pttl > lease*3/2 {
		t.Fatalf("the dead claim's entry has %v (%v) to live, want at most its 3/2 Lease %v", pttl, err, lease*3/2)
	}

	resp, err := reserve(t, cb, "dc-1", 3*time.Second)
	if err != nil || resp.GetReservationId() != "b-1" {
		t.Fatalf("B's repeat: %q %v, want it run on B (b-1)", resp.GetReservationId(), err)
	}
	bRan := <-ran
	// B runs once the entry is gone, not before (the dead claim may be a
	// live request's until then), and within a poll of it: B polls at most
	// every 100 ms; 300 ms more is scheduling slack for -race on a loaded
	// machine.
	if ended := before.Add(pttl); bRan.Before(ended) {
		t.Errorf("B ran %s before the dead claim's entry ended: it took the key from a claim that may be live", ended.Sub(bRan))
	}
	ended := after.Add(pttl + time.Millisecond)
	if limit := 100*time.Millisecond + 300*time.Millisecond; bRan.Sub(ended) > limit {
		t.Errorf("B ran %s after the dead claim's entry ended, want within %s", bRan.Sub(ended), limit)
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
