package redisstore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// atk26cOverlap counts the handlers of one key running at once across
// replicas, and the most that ever did.
type atk26cOverlap struct{ now, most atomic.Int64 }

func (o *atk26cOverlap) enter() {
	n := o.now.Add(1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
}
func (o *atk26cOverlap) leave() { o.now.Add(-1) }

// TestAttack26CRepliesJustPastTheRenewalBound: two replicas on one Redis.
// Replica A reaches it through a proxy that, once A's handler runs, holds
// every reply 450 ms: just past the renewal bound (half of an 800 ms
// lease, 400 ms) and close to StoreTimeout (500 ms). Redis carries every renewal out, but A
// sees each one time out, and gives the key up at 5/4 Lease. The README
// ("A handler that loses its lease is told"): its handler's context is
// cancelled with ErrLeaseLost, its caller gets UNAVAILABLE ("lost its
// hold"), counted in LeasesLost, and a repeat gets the outcome of the
// request that holds the key, one answer per key. A repeat sent to
// replica B meanwhile waits; B runs the key only once A's handler has
// returned (never two handlers of the key at once), and the caller's
// retry is replayed B's answer. Counted on the servers: one commit.
func TestAttack26CRepliesJustPastTheRenewalBound(t *testing.T) {
	const lease = 800 * time.Millisecond
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	var overlap atk26cOverlap
	started := make(chan struct{}, 1)
	var cause atomic.Value
	a := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		overlap.enter()
		defer overlap.leave()
		started <- struct{}{}
		select {
		case <-time.After(4 * lease):
			return nil
		case <-ctx.Done():
			cause.Store(context.Cause(ctx))
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	b := &reserver{answer: "b", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		overlap.enter()
		defer overlap.leave()
		time.Sleep(20 * time.Millisecond)
		return nil
	}}
	sa := New(warmClient(t, p.Addr(), 8), "pastbound:")
	ga, ca := guarded(t, a, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(sa))
	loadScripts(t, sa)
	sb := New(warmClient(t, r.addr, 4), "pastbound:")
	gb, cb := guarded(t, b, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(sb))

	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, ca, "k-1", 6*time.Second)
		first <- err
	}()
	<-started
	p.DelayReplies(450 * time.Millisecond)
	time.Sleep(lease / 4)
	repeat, err := reserve(t, cb, "k-1", 6*time.Second)
	if err != nil || repeat.GetReservationId() != "b-1" {
		t.Errorf("the repeat on replica B: %q %v, want B's own run (b-1), once A gave the key up", repeat.GetReservationId(), err)
	}
	ferr := <-first
	if status.Code(ferr) != codes.Unavailable || !strings.Contains(status.Convert(ferr).Message(), "lost its hold") {
		t.Errorf("A's caller: %v; the README: UNAVAILABLE (\"lost its hold on the idempotency key\")", ferr)
	}
	if c, _ := cause.Load().(error); c != server.ErrLeaseLost {
		t.Errorf("A's handler's context ended with cause %v, want server.ErrLeaseLost", c)
	}
	p.DelayReplies(0)
	again, err := reserve(t, cb, "k-1", 3*time.Second)
	if err != nil || again.GetReservationId() != "b-1" {
		t.Errorf("A's caller's retry: %q %v, want the replay of b-1 (one answer per key)", again.GetReservationId(), err)
	}
	if ac, bc, most := a.commits.Load(), b.commits.Load(), overlap.most.Load(); ac+bc != 1 || most != 1 {
		t.Errorf("commits A %d, B %d; at most %d handlers of the key at once: want one commit, never two handlers at once", ac, bc, most)
	}
	if st := stats(t, ga); st.LeasesLost != 1 {
		t.Errorf("replica A's stats %+v: want LeasesLost 1", st)
	}
	if st := stats(t, gb); st.Waited < 1 || st.Replayed != 1 {
		t.Errorf("replica B's stats %+v: want the repeat to have waited and the retry replayed", st)
	}
}

// TestAttack26CReplicasWithDifferentLeases: a rolling change of a
// method's dedup lease leaves two replicas on one Redis with 150 ms and
// 5 s. The entry's life is its claimant's lease, renewed by it: a handler
// of 500 ms (over three short leases) on the short-lease replica keeps the
// key against repeats on the other, which wait and replay, and a repeat on
// the short-lease replica of a key the long-lease one runs waits for it,
// not for a lease of its own. The handler runs once per key either way.
func TestAttack26CReplicasWithDifferentLeases(t *testing.T) {
	r := startRedis(t)
	var overlap atk26cOverlap
	hook := func(context.Context, *inventoryv1.ReserveStockRequest) error {
		overlap.enter()
		defer overlap.leave()
		time.Sleep(500 * time.Millisecond)
		return nil
	}
	short := &reserver{answer: "short", hook: hook}
	long := &reserver{answer: "long", hook: hook}
	_, cs := guarded(t, short, reserveStockPolicy(150*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(warmClient(t, r.addr, 4), "leases:")))
	_, cl := guarded(t, long, reserveStockPolicy(5*time.Second, policy.StoreErrorRefuse), server.WithStore(New(warmClient(t, r.addr, 4), "leases:")))
	for _, tc := range []struct {
		key, want    string
		first, other inventoryv1.InventoryServiceClient
	}{
		{"on-short", "short-1", cs, cl},
		{"on-long", "long-1", cl, cs},
	} {
		done := make(chan error, 1)
		go func() {
			resp, err := reserve(t, tc.first, tc.key, 3*time.Second)
			if err == nil && resp.GetReservationId() != tc.want {
				err = status.Errorf(codes.Unknown, "answer %q", resp.GetReservationId())
			}
			done <- err
		}()
		for _, at := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond} {
			time.Sleep(at / 2)
			if resp, err := reserve(t, tc.other, tc.key, 3*time.Second); err != nil || resp.GetReservationId() != tc.want {
				t.Errorf("key %s, a repeat on the other replica: %q %v, want the replay of %s", tc.key, resp.GetReservationId(), err, tc.want)
			}
		}
		if err := <-done; err != nil {
			t.Errorf("key %s, the first: %v, want %s", tc.key, err, tc.want)
		}
	}
	if s, l, most := short.runs.Load(), long.runs.Load(), overlap.most.Load(); s != 1 || l != 1 || most != 1 {
		t.Errorf("runs: short-lease replica %d, long-lease replica %d, at most %d at once; want one run per key", s, l, most)
	}
}
