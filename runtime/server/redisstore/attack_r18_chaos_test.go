package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
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

// TestAttackR18ReplicasRaceThroughFaults: two replicas share one Redis, each
// through a proxy of its own (one client with go-redis's retries, one
// without) that, all along, loses replies (Redis carried
// the command out, the connection drops on the way back) and holds others
// up to 30 ms. Many keys, each sent four times at once, two to each
// replica, and again after a failure, as a client retries. Whatever the
// faults, no key's handler commits twice, and every caller told success
// for a key gets the same answer. What a fault may cost is an UNAVAILABLE
// (the store did not answer: the client retries it with the same key),
// never a second effect.
func TestAttackR18ReplicasRaceThroughFaults(t *testing.T) {
	const (
		// Long enough that a loaded machine's pauses are not outages:
		// what is attacked is the replies lost and held.
		lease = 2 * time.Second
		keys  = 24
	)
	r := startRedis(t)
	var mu sync.Mutex
	commits := map[string]int{}
	handler := func(name string) *reserver {
		return &reserver{answer: name, hook: func(ctx context.Context, req *inventoryv1.ReserveStockRequest) error {
			select {
			case <-time.After(time.Duration(10+rand.N(50)) * time.Millisecond):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			mu.Lock()
			commits[req.GetOrderId()]++
			mu.Unlock()
			return nil
		}}
	}
	var proxies []*tcpproxy.Proxy
	var guards []*server.Guard
	var clients []inventoryv1.InventoryServiceClient
	for _, name := range []string{"a", "b"} {
		p := tcpproxy.Start(t, r.addr)
		rc := retryingClient(t, p.Addr()) // go-redis sends a command again after a lost reply
		if name == "b" {
			rc = client(t, p.Addr()) // the Guard sees every lost reply
		}
		s := New(rc, "chaos:")
		loadScripts(t, s)
		g, c := guarded(t, handler(name), reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(s))
		proxies, clients, guards = append(proxies, p), append(clients, c), append(guards, g)
	}

	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Add(1)
	go func() {
		defer faults.Done()
		for i := 0; ; i++ {
			p := proxies[i%2]
			p.LoseNextReply()
			p.DelayReplies(time.Duration(rand.N(30)) * time.Millisecond)
			select {
			case <-stop:
				for _, p := range proxies {
					p.DelayReplies(0)
				}
				return
			case <-time.After(15 * time.Millisecond):
			}
		}
	}()

	var answers sync.Map // key → the first successful answer
	var wrong, unavailable, other atomic.Int64
	var calls sync.WaitGroup
	for k := range keys {
		key := "ch-" + strconv.Itoa(k)
		for i := range 4 {
			calls.Add(1)
			go func() {
				defer calls.Done()
				for attempt := 0; attempt < 3; attempt++ { // a client's retries, same key
					resp, err := reserve(t, clients[i%2], key, 2*time.Second)
					switch status.Code(err) {
					case codes.OK:
						if got, _ := answers.LoadOrStore(key, resp.GetReservationId()); got != resp.GetReservationId() {
							wrong.Add(1)
							t.Errorf("key %s: answered %q and %q", key, got, resp.GetReservationId())
						}
						return
					case codes.Unavailable:
						unavailable.Add(1)
						time.Sleep(time.Duration(20+rand.N(30)) * time.Millisecond)
					default:
						other.Add(1)
						t.Errorf("key %s: %v", key, err)
						return
					}
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
	}
	calls.Wait()
	close(stop)
	faults.Wait()

	mu.Lock()
	defer mu.Unlock()
	for key, n := range commits {
		if n > 1 {
			t.Errorf("key %s: the handler committed %d times, want at most 1", key, n)
		}
	}
	t.Logf("%d keys committed, %d UNAVAILABLE answers (retried), %d replies lost; stats %+v, %+v", len(commits), unavailable.Load(), proxies[0].Lost()+proxies[1].Lost(), stats(t, guards[0]), stats(t, guards[1]))
	if proxies[0].Lost()+proxies[1].Lost() == 0 {
		t.Error("no reply was lost: the test attacked nothing")
	}
}
