package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/internal/storetest"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

func metadataWithKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
}

// retryingClient is a client of addr with go-redis's default retries (3 on
// a network error), as a production client has them.
func retryingClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestAttackCompleteReplyLost: Redis writes the outcome, and its reply is
// lost (the connection drops on the way back). The outcome was kept, so the
// caller must get its answer, not "lost its hold on the idempotency key",
// and no lease counts as lost; a repeat on another replica gets the same
// answer. Both with go-redis's own retries and with the Guard's.
func TestAttackCompleteReplyLost(t *testing.T) {
	for _, retries := range []bool{false, true} {
		t.Run(fmt.Sprint("go-redis retries ", retries), func(t *testing.T) {
			r := startRedis(t)
			p := tcpproxy.Start(t, r.addr)
			rc := client(t, p.Addr())
			if retries {
				rc = retryingClient(t, p.Addr())
			}
			srv := &reserver{answer: "a", hook: func(_ context.Context, req *inventoryv1.ReserveStockRequest) error {
				if req.GetOrderId() == "o-1" {
					p.LoseNextReply() // the next reply is Complete's
				}
				return nil
			}}
			g, c := guarded(t, srv, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(rc, "lostreply:")))
			other := &reserver{answer: "b"}
			_, cb := guarded(t, other, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "lostreply:")))
			if _, err := reserve(t, c, "warm", time.Second); err != nil { // the scripts loaded
				t.Fatal(err)
			}
			resp, err := reserve(t, c, "o-1", 3*time.Second)
			if p.Lost() != 1 {
				t.Fatalf("%d replies lost, want 1", p.Lost())
			}
			if err != nil {
				t.Errorf("caller whose outcome was kept: %v, want its answer", err)
			}
			again, err := reserve(t, cb, "o-1", time.Second)
			if err != nil || (resp != nil && again.GetReservationId() != resp.GetReservationId()) {
				t.Errorf("repeat on the other replica: %q %v, want %q", again.GetReservationId(), err, resp.GetReservationId())
			}
			if n := srv.runs.Load() + other.runs.Load(); n != 2 {
				t.Errorf("handler ran %d times for two keys, want 2", n)
			}
			if s := stats(t, g); s.LeasesLost != 0 || s.NotKept != 0 {
				t.Errorf("stats %+v: a kept outcome counted as a lost lease or not kept", s)
			}
		})
	}
}

// TestAttackClaimReplyLost: Redis writes the claim, and its reply is lost.
// With go-redis's retries, the retried claim finds the request's own
// pending entry: it must run, not wait for itself until its deadline. With
// no retries, the request is refused (UNAVAILABLE), and the caller's
// immediate retry must run rather than wait for a request that never ran.
func TestAttackClaimReplyLost(t *testing.T) {
	for _, retries := range []bool{true, false} {
		t.Run(fmt.Sprint("go-redis retries ", retries), func(t *testing.T) {
			r := startRedis(t)
			p := tcpproxy.Start(t, r.addr)
			rc := client(t, p.Addr())
			if retries {
				rc = retryingClient(t, p.Addr())
			}
			srv := &reserver{answer: "a"}
			// The entry would live 3 s: far past the requests' deadline.
			_, c := guarded(t, srv, reserveStockPolicy(2*time.Second, policy.StoreErrorRefuse), server.WithStore(New(rc, "lostclaim:")))
			if _, err := reserve(t, c, "warm", time.Second); err != nil {
				t.Fatal(err)
			}
			p.LoseNextReply()
			_, err := reserve(t, c, "o-1", time.Second)
			if p.Lost() != 1 {
				t.Fatalf("%d replies lost, want 1", p.Lost())
			}
			if !retries {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("claim failed: %v, want UNAVAILABLE", err)
				}
				_, err = reserve(t, c, "o-1", time.Second)
			}
			if err != nil {
				t.Errorf("request whose claim reply was lost: %v, want it run", err)
			}
			if n := srv.runs.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2 (warm-up and o-1)", n)
			}
		})
	}
}

// TestAttackRunWithoutDedupRechecksDeadline: under RunWithoutDedup, a claim
// that times out against a silent Redis takes up to a quarter of the time
// the request has left. A request that arrived with just over MinDeadline
// then has less than MinDeadline: it must be refused, not run. One that
// arrived with plenty still runs without dedup.
func TestAttackRunWithoutDedupRechecksDeadline(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "r"}
	pol := reserveStockPolicy(time.Second, policy.StoreErrorRunWithoutDedup)
	pol.Methods[0].MinDeadline = 200 * time.Millisecond
	g, c := guarded(t, srv, pol, server.WithStore(New(client(t, p.Addr()), "mindl:")))
	if _, err := reserve(t, c, "warm", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	defer p.Restore()
	// 240 ms: the claim waits 60 ms, leaving 180 ms < 200 ms.
	if _, err := reserve(t, c, "o-short", 240*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("request left under MinDeadline by the claim: %v, want DEADLINE_EXCEEDED", err)
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1 (the warm-up): a request with too little time left ran", n)
	}
	if _, err := reserve(t, c, "o-long", 2*time.Second); err != nil {
		t.Errorf("request with time to spare: %v, want it run without dedup", err)
	}
	if s := stats(t, g); s.RanWithoutDedup != 1 || s.DeadlineRefused != 1 {
		t.Errorf("stats %+v: want one run without dedup, one deadline refusal", s)
	}
}

// TestAttackSlowRedis: every reply is held for half of StoreTimeout, then
// for one and a half times it. Under it, requests are served and run once, with no store
// error. Over it, Refuse answers UNAVAILABLE without running the handler
// (its claims, carried out late, are released); once Redis is fast again
// the refused key runs, once.
func TestAttackSlowRedis(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "r"}
	g, c := guarded(t, srv, reserveStockPolicy(3*time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "slow:")))
	if _, err := reserve(t, c, "warm", time.Second); err != nil {
		t.Fatal(err)
	}
	p.DelayReplies(server.StoreTimeout / 2) // a margin a loaded machine keeps
	first, err := reserve(t, c, "under", 5*time.Second)
	if err != nil {
		t.Fatalf("Redis answering in 0.5 StoreTimeout: %v", err)
	}
	again, err := reserve(t, c, "under", 5*time.Second)
	if err != nil || again.GetReservationId() != first.GetReservationId() {
		t.Errorf("repeat under a slow Redis: %q %v, want %q", again.GetReservationId(), err, first.GetReservationId())
	}
	if s := stats(t, g); s.StoreErrors != 0 || srv.runs.Load() != 2 {
		t.Errorf("under StoreTimeout: %d runs, stats %+v; want 2 runs and no store error", srv.runs.Load(), s)
	}
	p.DelayReplies(server.StoreTimeout * 3 / 2)
	start := time.Now()
	if _, err := reserve(t, c, "over", 5*time.Second); status.Code(err) != codes.Unavailable {
		t.Errorf("Redis answering in 1.5 StoreTimeout: %v, want UNAVAILABLE", err)
	}
	if el := time.Since(start); el > server.StoreTimeout+400*time.Millisecond {
		t.Errorf("refusal took %s, want about StoreTimeout", el)
	}
	if n := srv.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times with Redis over StoreTimeout, want still 2", n)
	}
	p.DelayReplies(0)
	eventually(t, "the refused key runs once Redis is fast", func() bool {
		_, err := reserve(t, c, "over", time.Second)
		return err == nil
	})
	if n := srv.runs.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}
}

// TestAttackRedisRestartMidHandler: Redis restarts empty while a handler
// runs (no persistence, or a failover that lost the entry). This is a store
// that loses its data, outside "an outage shorter than Lease": a repeat on
// another replica claims the empty key and runs at once, alongside the
// first. What must still hold: the first handler is told (ErrLeaseLost) at
// its next renewal, its caller gets UNAVAILABLE rather than a second
// answer, and every later repeat gets the one kept answer.
func TestAttackRedisRestartMidHandler(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	started := make(chan struct{})
	var told atomic.Int64
	a := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		close(started)
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
			return errors.New("never told")
		}
		if errors.Is(context.Cause(ctx), server.ErrLeaseLost) {
			told.Store(time.Now().UnixNano())
		}
		return ctx.Err()
	}}
	b := &reserver{answer: "b"}
	ga, ca := guarded(t, a, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(retryingClient(t, r.addr), "restart:")))
	_, cb := guarded(t, b, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(retryingClient(t, r.addr), "restart:")))
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, ca, "o-1", 5*time.Second)
		first <- err
	}()
	<-started
	restartRedis(t, r)
	restarted := time.Now()
	resp, err := reserve(t, cb, "o-1", 2*time.Second)
	if err != nil {
		t.Fatalf("repeat after the restart: %v", err)
	}
	if err := <-first; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "lost its hold") {
		t.Errorf("first caller after its entry vanished: %v, want UNAVAILABLE (lost its hold)", err)
	}
	if at := told.Load(); at == 0 {
		t.Error("the first handler was never told its lease was lost")
	} else if d := time.Unix(0, at).Sub(restarted); d > lease/4+server.StoreTimeout {
		t.Errorf("the first handler was told %s after the restart, want within Lease/4 plus a round trip", d)
	}
	for _, cl := range []inventoryv1.InventoryServiceClient{ca, cb} {
		again, err := reserve(t, cl, "o-1", time.Second)
		if err != nil || again.GetReservationId() != resp.GetReservationId() {
			t.Errorf("later repeat: %q %v, want the kept answer %q", again.GetReservationId(), err, resp.GetReservationId())
		}
	}
	if a.commits.Load() != 0 || b.commits.Load() != 1 {
		t.Errorf("commits: first %d, second %d; want 0 and 1", a.commits.Load(), b.commits.Load())
	}
	if s := stats(t, ga); s.LeasesLost != 1 {
		t.Errorf("first replica's stats %+v, want one lease lost", s)
	}
}

// TestAttackMismatchAcrossReplicas: a key running on replica A is reused
// with another body on replica B: B refuses it at once with
// INVALID_ARGUMENT (the fingerprint travels in the Redis entry), while A
// runs and after A is done; the same body on B gets A's answer.
func TestAttackMismatchAcrossReplicas(t *testing.T) {
	r := startRedis(t)
	started, finish := make(chan struct{}), make(chan struct{})
	a := &reserver{answer: "a", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		close(started)
		<-finish
		return nil
	}}
	b := &reserver{answer: "b"}
	_, ca := guarded(t, a, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "mm:")))
	gb, cb := guarded(t, b, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "mm:")))
	first := make(chan *inventoryv1.ReserveStockResponse, 1)
	go func() {
		resp, err := reserve(t, ca, "o-1", 3*time.Second)
		if err != nil {
			t.Error(err)
		}
		first <- resp
	}()
	<-started
	other := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx = metadataWithKey(ctx, "o-1")
		_, err := cb.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "b", Units: 9})
		return err
	}
	start := time.Now()
	if err := other(); status.Code(err) != codes.InvalidArgument || time.Since(start) > 200*time.Millisecond {
		t.Errorf("another body while the first runs: %v after %s, want INVALID_ARGUMENT at once", err, time.Since(start))
	}
	close(finish)
	resp := <-first
	if err := other(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("another body after the first is done: %v, want INVALID_ARGUMENT", err)
	}
	again, err := reserve(t, cb, "o-1", time.Second)
	if err != nil || again.GetReservationId() != resp.GetReservationId() {
		t.Errorf("the same body on B: %q %v, want A's %q", again.GetReservationId(), err, resp.GetReservationId())
	}
	if b.runs.Load() != 0 || a.runs.Load() != 1 {
		t.Errorf("runs: A %d, B %d; want 1 and 0", a.runs.Load(), b.runs.Load())
	}
	if s := stats(t, gb); s.Mismatched != 2 {
		t.Errorf("B's mismatches %d, want 2", s.Mismatched)
	}
}

// TestAttackRenewalRacesCompletion: 40 requests with a 1.2 s lease
// (renewed every 300 ms) whose handlers end at times spread over three
// renewal periods, through a proxy that holds each reply 9 ms, so that
// completions fall before, during and after renewals in flight. Every
// caller gets its answer, no lease is lost, every repeat replays it. The
// times are those of a 400 ms lease scaled by three (the spread, the
// reply's hold), so that the renewals' and the completions' relations
// stay while a renewal has 1.5 s, not 500 ms, before its lease is lost:
// at load 15 under -race, 40 keepers renewing every 100 ms lost 8 leases.
func TestAttackRenewalRacesCompletion(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	p.DelayReplies(9 * time.Millisecond)
	srv := &reserver{answer: "r", hook: func(_ context.Context, req *inventoryv1.ReserveStockRequest) error {
		n, _ := strconv.Atoi(strings.TrimPrefix(req.GetOrderId(), "race-"))
		time.Sleep(time.Duration(240+n*18) * time.Millisecond) // ends spread across the renewals
		return nil
	}}
	// A 1.2 s lease is renewed every 300 ms and lost after 1.5 s without a
	// renewal: slack a loaded machine's timers keep.
	g, c := guarded(t, srv, reserveStockPolicy(1200*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "race:")))
	const n = 40
	answers := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := reserve(t, c, "race-"+strconv.Itoa(i), 3*time.Second)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			answers[i] = resp.GetReservationId()
		}()
	}
	wg.Wait()
	for i := range n {
		resp, err := reserve(t, c, "race-"+strconv.Itoa(i), time.Second)
		if err != nil || resp.GetReservationId() != answers[i] {
			t.Errorf("repeat %d: %q %v, want %q", i, resp.GetReservationId(), err, answers[i])
		}
	}
	if s := stats(t, g); s.LeasesLost != 0 || s.NotKept != 0 || s.Replayed != n || srv.runs.Load() != n {
		t.Errorf("%d runs, stats %+v; want %d runs and replays, nothing lost", srv.runs.Load(), s, n)
	}
}

// TestAttackStoreRetriedOperations is the Store contract for operations
// sent again after their answer was lost (storetest.RetriedOperations), on
// Redis.
func TestAttackStoreRetriedOperations(t *testing.T) {
	storetest.RetriedOperations(t, New(client(t, startRedis(t).addr), "retried:"))
}
