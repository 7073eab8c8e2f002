package redisstore

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLeaseClaimOnlyAsFastAsARenewalCan: a handler that outlives its
// lease (900 ms, past the 750 ms at which a lease of 600 ms that is not
// renewed is given up) behind a real Redis whose every reply is held.
//
// Held 400 ms, slower than the 300 ms a renewal is waited for (half the
// lease) but faster than the lease: a claim accepted at that speed could
// never be renewed, and its handler would be cancelled with ErrLeaseLost
// at 5/4 of the lease for a store that only answered slowly. Such a claim
// is the store failing: the request is refused UNAVAILABLE
// (StoreErrorRefuse), the handler never runs and no lease is lost.
//
// Held 120 ms, faster than half the lease: the same handler runs once,
// renewing all along, its caller gets its answer, no lease is lost, and
// the outcome is kept for the repeat.
//
// The Guard's connections to Redis are opened before Redis slows down: a
// new one's handshake costs round trips of its own.
func TestLeaseClaimOnlyAsFastAsARenewalCan(t *testing.T) {
	const lease = 600 * time.Millisecond
	srv, p, g, c := slowStoreRig(t, "renewable:", "long", 900*time.Millisecond, lease)

	p.DelayReplies(400 * time.Millisecond)
	_, err := reserve(t, c, "slow-1", 5*time.Second)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a claim answered in 400 ms under a 600 ms lease: %v, want UNAVAILABLE (the store failing)", err)
	}
	if n := srv.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times behind a store too slow to renew its lease, want 0", n)
	}
	if st := stats(t, g); st.LeasesLost != 0 || st.StoreErrors == 0 {
		t.Errorf("stats %+v: want the slow claim counted as a store error and no lease lost (none was held)", st)
	}

	p.DelayReplies(120 * time.Millisecond)
	resp, err := reserve(t, c, "fast-1", 5*time.Second)
	if err != nil || resp.GetReservationId() != "long-1" {
		t.Errorf("a handler of 900 ms behind replies of 120 ms under a 600 ms lease: %q %v, want its answer long-1", resp.GetReservationId(), err)
	}
	if st := stats(t, g); st.LeasesLost != 0 || st.NotKept != 0 {
		t.Errorf("stats %+v: want no lease lost and the outcome kept", st)
	}
	p.DelayReplies(0)
	again, err := reserve(t, c, "fast-1", 5*time.Second)
	if err != nil || again.GetReservationId() != "long-1" || srv.runs.Load() != 1 {
		t.Errorf("the repeat: %q %v after %d runs, want the replay of long-1 after one run", again.GetReservationId(), err, srv.runs.Load())
	}
}
