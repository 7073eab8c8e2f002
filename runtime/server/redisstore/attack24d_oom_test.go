package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack24dOutcomeWrittenWhenRedisIsFull: the store's Redis runs
// `maxmemory-policy noeviction`, as the README tells it to, and is shared
// with a cache that fills it while a request's handler runs (its charge is
// made). Redis then refuses every write that grows memory ("OOM command
// not allowed"), and the outcome's write is one: before, it was retried
// for 5/4 Lease, the caller's answer held back that long, the outcome
// never kept (NotKept), and once the cache shrank a retry after the
// entry lapsed ran the handler a second time. The pending entry the
// request holds is its own, renewed all along (PEXPIRE is not refused):
// the write replaces it, so it is written even when Redis is full, and
// the retry is replayed. A new claim is still refused while Redis is
// full (OnStoreError decides).
func TestAttack24dOutcomeWrittenWhenRedisIsFull(t *testing.T) {
	const lease = 400 * time.Millisecond
	addr := startRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction").addr
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	srv := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, addr), "oom:")))
	first := make(chan error, 1)
	var firstID string
	go func() {
		r, err := reserve(t, c, "oom-1", 5*time.Second)
		firstID = r.GetReservationId()
		first <- err
	}()
	<-started

	// The cache fills Redis, its keys without a TTL, past its maxmemory
	// (its operator lowers it, or the cache grows): every write that
	// grows memory is refused until the cache shrinks.
	cache := client(t, addr)
	ctx := context.Background()
	const n = 40
	big := strings.Repeat("x", 64<<10)
	for i := 0; i < n; i++ {
		if err := cache.Set(ctx, "cache:"+strconv.Itoa(i), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cache.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cache.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("Redis still takes a small write: %v", err)
	}
	// A new key is refused meanwhile: its claim is a write that grows
	// memory.
	if _, err := reserve(t, c, "oom-2", 5*time.Second); status.Code(err) != codes.Unavailable {
		t.Errorf("a new key while Redis is full: %v, want UNAVAILABLE (the claim refused)", err)
	}
	close(release)
	if err := <-first; err != nil || firstID != "a-1" {
		t.Fatalf("the first: %q %v, want its answer a-1", firstID, err)
	}

	// The cache shrinks again; the caller's retry comes after the entry
	// would have lapsed (3/2 Lease).
	for i := 0; i < n; i++ {
		cache.Del(ctx, "cache:"+strconv.Itoa(i))
	}
	if err := cache.ConfigSet(ctx, "maxmemory", "64mb").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease + lease/2)
	again, err := reserve(t, c, "oom-1", 5*time.Second)
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (the retry: %q %v)", n, again.GetReservationId(), err)
	}
	if err != nil || again.GetReservationId() != "a-1" {
		t.Errorf("the retry: %q %v, want the replay of a-1", again.GetReservationId(), err)
	}
	if s := stats(t, g); s.NotKept != 0 || s.Replayed != 1 {
		t.Errorf("stats %+v: want the outcome kept (NotKept 0) and replayed once", s)
	}
}
