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

// TestAttackR18RedisEvictsPendingEntry: Redis is shared with a cache and
// runs out of memory while a request holds its key. Every entry of the
// store has a TTL, so under a volatile-* (or allkeys-*) maxmemory-policy
// Redis drops it first: the key is free again, a repeat runs the handler
// while the first still runs (two runs), and the first learns it at its
// next renewal. Under noeviction the cache's writes fail instead, the
// entry stays, and the repeat waits for the first: one run. The README's
// Stores paragraph says which policy the store needs.
func TestAttackR18RedisEvictsPendingEntry(t *testing.T) {
	for _, tc := range []struct {
		policy string
		runs   int64
	}{
		{"volatile-ttl", 2},
		{"noeviction", 1},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			addr := startRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", tc.policy).addr
			release := make(chan struct{})
			started := make(chan struct{}, 2)
			srv := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
				started <- struct{}{}
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return status.FromContextError(context.Cause(ctx)).Err()
				}
			}}
			_, c := guarded(t, srv, reserveStockPolicy(2*time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, addr), "evict:")))
			first := make(chan error, 1)
			go func() {
				_, err := reserve(t, c, "ev-1", 5*time.Second)
				first <- err
			}()
			<-started

			// The cache fills Redis, its keys without a TTL.
			cache := client(t, addr)
			ctx := context.Background()
			big := strings.Repeat("x", 64<<10)
			for i := 0; i < 200; i++ {
				if err := cache.Set(ctx, "cache:"+strconv.Itoa(i), big, 0).Err(); err != nil {
					break // OOM: nothing left to evict
				}
			}
			evicted := cache.Exists(ctx, "evict:"+"/example.inventory.v1.InventoryService/ReserveStock:0::ev-1").Val() == 0
			if evicted != (tc.runs == 2) {
				t.Fatalf("maxmemory-policy %s: the pending entry evicted: %v", tc.policy, evicted)
			}
			// The cache shrinks again; the repeat arrives.
			for i := 0; i < 200; i++ {
				cache.Del(ctx, "cache:"+strconv.Itoa(i))
			}
			repeat := make(chan error, 1)
			go func() {
				_, err := reserve(t, c, "ev-1", 3*time.Second)
				repeat <- err
			}()
			select {
			case <-started: // the repeat runs alongside the first
			case <-time.After(300 * time.Millisecond): // the repeat waits
			}
			close(release)
			errFirst, errRepeat := <-first, <-repeat
			if n := srv.runs.Load(); n != tc.runs {
				t.Errorf("maxmemory-policy %s: the handler ran %d times, want %d (entry evicted: %v; first %v, repeat %v)", tc.policy, n, tc.runs, evicted, errFirst, errRepeat)
			}
			if tc.runs == 1 && (errFirst != nil || errRepeat != nil) {
				t.Errorf("noeviction: first %v, repeat %v; want both answered", errFirst, errRepeat)
			}
			if tc.runs == 2 && status.Code(errFirst) != codes.Unavailable {
				t.Errorf("volatile-ttl: the first, whose entry was evicted: %v, want UNAVAILABLE (lost its hold)", errFirst)
			}
		})
	}
}
