package redisstore

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18SlowRedisShortLease: every Redis reply is held 260 ms (a
// Redis in another zone, or one busy with a slow command) and the lease is
// 1 s, so the store answers well within the lease's slack: a renewal due
// every 250 ms that takes 260 ms still keeps the entry alive (it lives
// 1.5 s past each renewal). A renewal bounded by a quarter of the lease
// (250 ms) times out every time, though: the request gives its key up
// after 5/4 of the lease, its handler is cancelled with ErrLeaseLost and
// its caller gets UNAVAILABLE, for a store that only answered slowly. A
// slow store is not an outage: the handler runs once, its caller gets its
// answer, no lease is lost.
//
// The times leave a loaded machine 240 ms over each reply, the most the
// Guard's bounds allow a store slower than a quarter lease: a renewal is
// bounded by half the lease but at most StoreTimeout (500 ms), as are the
// claim and the outcome's write. (With 120 ms replies against a 400 ms
// lease, a renewal had 80 ms over its reply, and under load one that
// missed it cost the lease.) The connections the Guard uses are opened
// before Redis slows down: a new one's handshake would cost round trips of
// its own, two of them past StoreTimeout.
func TestAttackR18SlowRedisShortLease(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "slow", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		select {
		case <-time.After(1300 * time.Millisecond): // more than a lease and a quarter
			return nil
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	rc := warmClient(t, p.Addr(), 4)
	s := New(rc, "slowlease:")
	g, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	p.DelayReplies(260 * time.Millisecond)

	resp, err := reserve(t, c, "sl-1", 5*time.Second)
	if err != nil || resp.GetReservationId() != "slow-1" {
		t.Errorf("a handler behind a slow Redis: %q %v, want its answer slow-1", resp.GetReservationId(), err)
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	st := stats(t, g)
	if st.LeasesLost != 0 || st.NotKept != 0 {
		t.Errorf("stats %+v: want no lease lost and the outcome kept", st)
	}
	p.DelayReplies(0)
	again, err := reserve(t, c, "sl-1", 5*time.Second)
	if err != nil || again.GetReservationId() != "slow-1" || srv.runs.Load() != 1 {
		t.Errorf("the repeat: %q %v after %d runs, want the replay of slow-1", again.GetReservationId(), err, srv.runs.Load())
	}
}
