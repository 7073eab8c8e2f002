package redisstore

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAttack21cSlowClaimThenItsRetry: a claim slower than half the lease
// is refused as a store failure (UNAVAILABLE) though Redis carried it
// out. Its caller's retries, sent at once with the same key (two at a
// time, as a hedged pair), when Redis answers quickly again, must not be
// held behind the abandoned claim until its lease runs out, nor run the
// handler twice: one runs it once, to its answer; the other waits for it
// or is told the request is in flight; a later repeat replays it. The
// handler is never cancelled (no lease lost).
func TestAttack21cSlowClaimThenItsRetry(t *testing.T) {
	const lease = 600 * time.Millisecond
	srv, p, g, c := slowStoreRig(t, "attack21c:", "r", 150*time.Millisecond, lease)

	p.DelayReplies(400 * time.Millisecond)
	if _, err := reserve(t, c, "k-1", 5*time.Second); status.Code(err) != codes.Unavailable {
		t.Fatalf("a claim answered in 400 ms under a 600 ms lease: %v, want UNAVAILABLE", err)
	}
	p.DelayReplies(0)
	start := time.Now()
	type answer struct {
		id  string
		err error
	}
	answers := make(chan answer, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := reserve(t, c, "k-1", 5*time.Second)
			answers <- answer{resp.GetReservationId(), err}
		})
	}
	wg.Wait()
	close(answers)
	took := time.Since(start)
	ok := 0
	for a := range answers {
		switch {
		case a.err == nil && a.id == "r-1":
			ok++
		case a.err == nil:
			t.Errorf("a retry got %q, want r-1, the one run's answer", a.id)
		default:
			t.Logf("a retry: %v", a.err)
		}
	}
	if ok == 0 {
		t.Errorf("neither retry got the answer")
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times for one key, want 1", n)
	}
	t.Logf("the retries took %v (lease %v)", took, lease)
	again, err := reserve(t, c, "k-1", 5*time.Second)
	if err != nil || again.GetReservationId() != "r-1" || srv.runs.Load() != 1 {
		t.Errorf("the repeat: %q %v after %d runs, want the replay of r-1 after one run", again.GetReservationId(), err, srv.runs.Load())
	}
	if st := stats(t, g); st.LeasesLost != 0 {
		t.Errorf("stats %+v: a lease lost, the handler cancelled for no stated reason", st)
	}
}
