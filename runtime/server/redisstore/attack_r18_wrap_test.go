package redisstore

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18HugeLeaseOnRedis: the longest lease a policy may set
// (policy.MaxLease; a longer one is refused) and a TTL of the longest
// duration (an override may write ttl: 2562047h), which in milliseconds
// must not wrap to a negative number (kept at Redis's least, 1 ms: the
// entry would lapse at once, and a repeat run alongside the first). A
// request runs once; a repeat sent while it runs waits and gets its
// answer, as does one sent after.
func TestAttackR18HugeLeaseOnRedis(t *testing.T) {
	p := reserveStockPolicy(policy.MaxLease, policy.StoreErrorRefuse)
	p.Methods[0].Dedup.TTL = math.MaxInt64
	started := make(chan struct{}, 2)
	srv := &reserver{answer: "h", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		started <- struct{}{}
		time.Sleep(150 * time.Millisecond)
		return nil
	}}
	g, c := guarded(t, srv, p, server.WithStore(New(client(t, startRedis(t).addr), "huge:")))
	var wg sync.WaitGroup
	check := func() {
		defer wg.Done()
		if resp, err := reserve(t, c, "hl-1", 2*time.Second); err != nil || resp.GetReservationId() != "h-1" {
			t.Errorf("under the longest lease and TTL: %q %v, want h-1", resp.GetReservationId(), err)
		}
	}
	wg.Add(2)
	go check()
	<-started
	time.Sleep(20 * time.Millisecond) // the entry's 1 ms, had it wrapped, is long gone
	go check()
	wg.Wait()
	wg.Add(1)
	check()
	if s := stats(t, g); srv.runs.Load() != 1 || s.Replayed != 2 || s.StoreErrors != 0 || s.LeasesLost != 0 {
		t.Errorf("%d runs, stats %+v; want 1 run, 2 replays, no store error, no lease lost", srv.runs.Load(), s)
	}
}
