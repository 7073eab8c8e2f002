package redisstore

import (
	"context"
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
)

// TestAttack19cLateClaimsOnRedisNeverRunTwice: a real Redis whose
// replies a proxy holds back, by turns not at all, 550 ms (past
// StoreTimeout: a claim answered after the Guard stopped waiting, a late
// success) and 900 ms (past the client's 650 ms read timeout: a late
// failure, though Redis carried the claim out at once), 70 ms each, with
// 210 ms of prompt replies after each. Four callers on each of four keys retry ReserveStock
// (StoreErrorRefuse, a 1 s lease) for 1.2 s, while late claims are
// released (Guard.claim's late func) under the requests that took the
// keys meanwhile and ran or kept them: a release names its own token, so
// it never frees a key another request holds or has done. The handler
// ran at most once per key, every caller that got an answer got that
// run's, and once Redis is prompt each key answers with it (a key whose
// late release could not be sent in StoreTimeout waits out its 1.5 s
// entry, then runs once).
//
// The prompt stretch is three times the others so that a request whose
// claim it answered also has its outcome written in it (10 ms later),
// however a loaded machine shifts the two: with 70 ms, at load 15, a
// completion fell into the held replies for its whole lease, its outcome
// was not kept (Stats.NotKept, which lets a repeat run the handler
// again), and the key ran twice. Before the last requests, the Redis
// client is seen to answer promptly again (at load 15 the first claim
// after the faults once took longer than StoreTimeout).
func TestAttack19cLateClaimsOnRedisNeverRunTwice(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &countingReserver{runs: map[string]int{}, busy: 10 * time.Millisecond}
	rc := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 650 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	s := New(rc, "late19c:")
	rs := &releaseSpy{Store: s}
	g, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(rs))
	loadScripts(t, s)
	keys := []string{"k1", "k2", "k3", "k4"}
	stop := make(chan struct{})
	var toggles sync.WaitGroup
	toggles.Add(1)
	go func() {
		defer toggles.Done()
		for i := 0; ; i++ {
			d, slot := []time.Duration{550 * time.Millisecond, 0, 900 * time.Millisecond, 0}[i%4], 70*time.Millisecond
			if d == 0 {
				slot = 210 * time.Millisecond
			}
			p.DelayReplies(d)
			select {
			case <-stop:
				return
			case <-time.After(slot):
			}
		}
	}()
	var wg sync.WaitGroup
	var other, ok atomic.Int64
	var answers sync.Map
	var mismatch atomic.Int64
	answered := func(k, id string) {
		if prev, loaded := answers.LoadOrStore(k, id); loaded && prev != id {
			mismatch.Add(1)
			t.Errorf("key %s: reservation %s, another caller got %s", k, id, prev)
		}
	}
	end := time.Now().Add(1200 * time.Millisecond)
	for _, k := range keys {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					resp, err := reserve(t, c, k, 1500*time.Millisecond)
					switch status.Code(err) {
					case codes.OK:
						ok.Add(1)
						answered(k, resp.GetReservationId())
					case codes.Unavailable, codes.DeadlineExceeded:
					default:
						other.Add(1)
						t.Logf("key %s: %v", k, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	toggles.Wait()
	for _, k := range keys {
		if n := srv.count(k); n > 1 {
			t.Errorf("key %s: the handler ran %d times; want at most once", k, n)
		}
	}
	if other.Load() != 0 {
		t.Errorf("%d requests answered other than OK, UNAVAILABLE, DEADLINE_EXCEEDED", other.Load())
	}
	p.DelayReplies(0)
	time.Sleep(1100 * time.Millisecond) // the slowest reply held 900 ms
	promptAgain(t, rc)
	for _, k := range keys {
		resp, err := reserve(t, c, k, 2500*time.Millisecond)
		if err != nil || srv.count(k) != 1 {
			t.Fatalf("key %s once Redis is prompt: %v, handler ran %d; want it run once in all (stats %+v)", k, err, srv.count(k), stats(t, g))
		}
		answered(k, resp.GetReservationId())
	}
	rs.mu.Lock()
	t.Logf("answered during the faults %d, StoreErrors %d, releases %d (failed %d)", ok.Load(), stats(t, g).StoreErrors, rs.n, len(rs.errs))
	rs.mu.Unlock()
}

// promptAgain waits, up to 3 s, until rc answers a PING within 100 ms
// (timed here: rc reads until its ReadTimeout, whatever the context).
func promptAgain(t *testing.T, rc *redis.Client) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); ; {
		sent := time.Now()
		err := rc.Ping(context.Background()).Err()
		took := time.Since(sent)
		if err == nil && took < 100*time.Millisecond {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("Redis through the proxy does not answer a PING within 100 ms once the faults ended: %v after %v", err, took)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type releaseSpy struct {
	*Store
	mu   sync.Mutex
	n    int
	errs []string
}

func (s *releaseSpy) Release(ctx context.Context, key, token string) error {
	err := s.Store.Release(ctx, key, token)
	s.mu.Lock()
	s.n++
	if err != nil {
		s.errs = append(s.errs, err.Error())
	}
	s.mu.Unlock()
	return err
}
