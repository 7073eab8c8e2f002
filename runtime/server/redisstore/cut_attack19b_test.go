package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// countingReserver counts the runs of ReserveStock per order id.
type countingReserver struct {
	inventoryv1.UnimplementedInventoryServiceServer
	mu   sync.Mutex
	runs map[string]int
	busy time.Duration
}

func (s *countingReserver) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	s.mu.Lock()
	s.runs[req.GetOrderId()]++
	n := s.runs[req.GetOrderId()]
	s.mu.Unlock()
	time.Sleep(s.busy)
	return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(req.GetOrderId(), "-", n)}, nil
}

func (s *countingReserver) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[key]
}

// TestAttack19bClaimsAnsweredJustAfterTheirRequests: every Redis reply is
// held 90 ms behind a proxy, so each claim is carried out at once and
// answered just after requests of 40 to 80 ms have ended (cut by the
// request's deadline). Twelve concurrent requests on each of four keys,
// three rounds: the handler never runs (no claim answered in time), each
// request answers DEADLINE_EXCEEDED (the Guard's, or its client's), no
// store error is counted (Redis answered well within StoreTimeout). Every
// late claim that won the key is released, so once Redis answers promptly
// again each key runs its handler exactly once, and a repeat replays.
// The Redis client has a connection for each of the 48 requests and its
// late release (go-redis's default is 20 on two cores): with 20, each
// connection's replies queued behind one another at 90 ms each, and at
// load 10 claims and releases waited past StoreTimeout for a connection,
// counted as store errors of a Redis that answers each in 90 ms.
func TestAttack19bClaimsAnsweredJustAfterTheirRequests(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &countingReserver{runs: map[string]int{}}
	rc := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1, PoolSize: 100})
	t.Cleanup(func() { _ = rc.Close() })
	s := New(rc, "cut19b:")
	g, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	p.DelayReplies(90 * time.Millisecond)
	worst := watchLateness(t, r.addr)
	keys := []string{"k1", "k2", "k3", "k4"}
	var other atomic.Int64
	for round := range 3 {
		var wg sync.WaitGroup
		for _, k := range keys {
			for range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := reserve(t, c, k, time.Duration(40+rand.N(41))*time.Millisecond)
					if status.Code(err) != codes.DeadlineExceeded {
						other.Add(1)
						t.Logf("round %d key %s: %v", round, k, err)
					}
				}()
			}
		}
		wg.Wait()
	}
	for _, k := range keys {
		if n := srv.count(k); n != 0 {
			t.Errorf("key %s: the handler ran %d times with no claim answered in time; want 0", k, n)
		}
	}
	if other.Load() != 0 {
		t.Errorf("%d requests answered other than DEADLINE_EXCEEDED", other.Load())
	}
	p.DelayReplies(0)
	// The late claims' releases are on their way (one reply delay each).
	time.Sleep(300 * time.Millisecond)
	if st := stats(t, g); st.StoreErrors != 0 {
		// A machine that left a bare timer, or a PING straight to Redis,
		// late by most of StoreTimeout made Redis slow for real: at load
		// 15 (CI beside six agents' race tests) 47 claims were seen to
		// take past StoreTimeout. Only then is the count not judged.
		if late := worst(); late+90*time.Millisecond < server.StoreTimeout {
			t.Errorf("StoreErrors %d for a Redis answering within 90 ms (the machine's worst lateness %s); want 0", st.StoreErrors, late)
		} else {
			t.Logf("StoreErrors %d not judged: a bare wait or a direct PING was %s late, so Redis did not answer within StoreTimeout", st.StoreErrors, late)
		}
	}
	for _, k := range keys {
		resp, err := reserve(t, c, k, 2*time.Second)
		if err != nil || srv.count(k) != 1 {
			t.Fatalf("key %s after Redis answers promptly: %v, handler ran %d; want it run once (the late claims released)", k, err, srv.count(k))
		}
		again, err := reserve(t, c, k, 2*time.Second)
		if err != nil || again.GetReservationId() != resp.GetReservationId() || srv.count(k) != 1 {
			t.Errorf("key %s repeat: %v %v (ran %d); want the replay of %q", k, again, err, srv.count(k), resp.GetReservationId())
		}
	}
}

// watchLateness samples, until the test ends or the returned func is
// called, how late the machine runs: a 5 ms sleep's overshoot and the
// round trip of a PING straight to Redis (no proxy). The func returns the
// worst seen.
func watchLateness(t *testing.T, addr string) (worst func() time.Duration) {
	direct := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	stop := make(chan struct{})
	done := make(chan time.Duration, 1)
	go func() {
		var w time.Duration
		defer func() { done <- w }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			begin := time.Now()
			time.Sleep(5 * time.Millisecond)
			w = max(w, time.Since(begin)-5*time.Millisecond)
			begin = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = direct.Ping(ctx).Err()
			cancel()
			w = max(w, time.Since(begin))
		}
	}()
	var once sync.Once
	var w time.Duration
	worst = func() time.Duration {
		once.Do(func() { close(stop); w = <-done; _ = direct.Close() })
		return w
	}
	t.Cleanup(func() { worst() })
	return worst
}

// TestAttack19bSameKeyShortDeadlinesRunOnce: Redis replies held 30 ms,
// each request's deadline drawn from 20 to 300 ms, a handler that takes
// 20 ms: some claims answer in time and run, most are cut before or
// while they wait for the running one. Forty concurrent requests on each
// of three keys, then Redis prompt again and one more each: the handler
// ran at most once per key, and the last request got the outcome of the
// run (or ran it, if none did).
func TestAttack19bSameKeyShortDeadlinesRunOnce(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &countingReserver{runs: map[string]int{}, busy: 20 * time.Millisecond}
	s := New(client(t, p.Addr()), "cutrun19b:")
	g, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	p.DelayReplies(30 * time.Millisecond)
	worst := watchLateness(t, r.addr)
	keys := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	var ok, unavailable atomic.Int64
	for _, k := range keys {
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := reserve(t, c, k, time.Duration(20+rand.N(281))*time.Millisecond)
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.Unavailable:
					unavailable.Add(1)
					t.Logf("key %s: %v", k, err)
				}
			}()
		}
	}
	wg.Wait()
	p.DelayReplies(0)
	time.Sleep(300 * time.Millisecond)
	for _, k := range keys {
		if n := srv.count(k); n > 1 {
			t.Errorf("key %s: the handler ran %d times under short deadlines; want at most 1", k, n)
		}
		if _, err := reserve(t, c, k, 2*time.Second); err != nil || srv.count(k) != 1 {
			t.Errorf("key %s at the end: %v, ran %d; want exactly one run in all", k, err, srv.count(k))
		}
	}
	st := stats(t, g)
	t.Logf("ok %d, unavailable %d; stats %+v", ok.Load(), unavailable.Load(), st)
	if unavailable.Load() != 0 || st.StoreErrors != 0 {
		// As in TestAttack19bClaimsAnsweredJustAfterTheirRequests: only
		// a machine that made Redis itself slower than StoreTimeout
		// excuses them (seen at load 16).
		if late := worst(); late+30*time.Millisecond < server.StoreTimeout {
			t.Errorf("%d UNAVAILABLE, %d store errors, for a Redis answering within 30 ms (the machine's worst lateness %s); want none", unavailable.Load(), st.StoreErrors, late)
		} else {
			t.Logf("%d UNAVAILABLE, %d store errors not judged: a bare wait or a direct PING was %s late", unavailable.Load(), st.StoreErrors, late)
		}
	}
}
