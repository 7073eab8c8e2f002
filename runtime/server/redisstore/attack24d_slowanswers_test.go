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

// TestAttack24dRedisAnswersLaterThanStoreTimeout: while a handler runs,
// Redis keeps answering, but every reply arrives 700 ms late, past
// StoreTimeout: each renewal, the outcome's write and the repeats'
// claims are carried out by Redis and seen by the Guard as failures.
// The repeats sent meanwhile are refused (UNAVAILABLE) without running;
// the first's caller gets its answer (the write, carried out, is not
// known to be: NotKept); once Redis answers in time again a repeat gets
// the replay. The handler runs once.
func TestAttack24dRedisAnswersLaterThanStoreTimeout(t *testing.T) {
	const lease = 3 * time.Second
	p := tcpproxy.Start(t, startRedis(t).addr)
	started, finish := make(chan struct{}, 4), make(chan struct{})
	srv := &reserver{answer: "late", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		started <- struct{}{}
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	s := New(warmClient(t, p.Addr(), 8), "late:")
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)

	first := make(chan error, 1)
	var firstID string
	go func() {
		r, err := reserve(t, c, "late-1", 10*time.Second)
		firstID = r.GetReservationId()
		first <- err
	}()
	<-started
	p.DelayReplies(700 * time.Millisecond)
	for i := range 2 {
		if _, err := reserve(t, c, "late-1", 3*time.Second); status.Code(err) != codes.Unavailable {
			t.Errorf("repeat %d behind replies 700 ms late: %v, want UNAVAILABLE", i+1, err)
		}
	}
	close(finish)
	if err := <-first; err != nil || firstID != "late-1" {
		t.Errorf("the first: %q %v, want its answer late-1", firstID, err)
	}
	p.DelayReplies(0)
	// Replies still held are let through; the connections they were held
	// on are then the pool's again.
	var again *inventoryv1.ReserveStockResponse
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if again, err = reserve(t, c, "late-1", 3*time.Second); status.Code(err) != codes.Unavailable {
			break
		}
	}
	if err != nil || again.GetReservationId() != "late-1" {
		t.Errorf("a repeat once Redis answers in time: %q %v, want the replay of late-1", again.GetReservationId(), err)
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if st := stats(t, g); st.LeasesLost != 0 || st.Replayed != 1 {
		t.Errorf("stats %+v: want no lease lost and one replay", st)
	}
}
