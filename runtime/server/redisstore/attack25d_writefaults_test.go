package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack25dSlowRedisWhileAFailureIsWritten: Redis answers, but every
// reply comes 700 ms late (past StoreTimeout and the 600 ms an entry of a
// 400 ms lease lives) from the moment the handler returns: the outcome's
// write, or the release of a failure not kept, is carried out by Redis
// and seen by the Guard as failing. A failure kept (NOT_FOUND) reaches its
// caller as it was, and once Redis answers in time the repeat gets it
// replayed, the handler run once; a failure forgotten (UNAVAILABLE)
// reaches its caller too, and its key was freed: the repeat runs the
// handler. Never a second run for the kept one, never a replay of the
// forgotten one.
func TestAttack25dSlowRedisWhileAFailureIsWritten(t *testing.T) {
	const lease = 400 * time.Millisecond
	p := tcpproxy.Start(t, startRedis(t).addr)
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		if run > 1 {
			return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
		}
		p.DelayReplies(700 * time.Millisecond)
		if order == "slow-kept" {
			return nil, status.Error(codes.NotFound, "no such sku")
		}
		return nil, status.Error(codes.Unavailable, "warehouse busy")
	})
	s := New(warmClient(t, p.Addr(), 8), "slowwrite25d:")
	g, cl := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	for _, tc := range []struct {
		order string
		code  codes.Code
		kept  bool
	}{{"slow-kept", codes.NotFound, true}, {"slow-forgotten", codes.Unavailable, false}} {
		t.Run(tc.order, func(t *testing.T) {
			sent := time.Now()
			first := callWithin(cl, tc.order, 5*time.Second)
			if first.code != tc.code || first.replayed {
				t.Fatalf("the first caller got %v; want the handler's %s", first, tc.code)
			}
			if took := time.Since(sent); took > 3*time.Second {
				t.Errorf("the first caller waited %s; the write is given up when the entry lapses (600 ms past the last renewal)", took)
			}
			p.DelayReplies(0)
			// Replies still held are let through; a repeat refused for the
			// store (its claim answered late) is sent again.
			var again answered
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if again = callWithin(cl, tc.order, 3*time.Second); !strings.Contains(again.msg, "idempotency store") {
					break
				}
			}
			if tc.kept {
				if again.code != codes.NotFound || !again.replayed || srv.count(tc.order) != 1 {
					t.Errorf("the repeat got %v, %d runs; want NOT_FOUND replayed, one run", again, srv.count(tc.order))
				}
				if st := stats(t, g); st.NotKept != 1 {
					t.Errorf("%d outcomes not known kept; want 1 (the test's premise: the write's answers came too late)", st.NotKept)
				}
				return
			}
			if again.code != codes.OK || again.id != tc.order+"-2" || srv.count(tc.order) != 2 {
				t.Errorf("the repeat got %v, %d runs; want the handler run again (%s-2)", again, srv.count(tc.order), tc.order)
			}
		})
	}
	if st := stats(t, g); st.LeasesLost != 0 {
		t.Errorf("%d leases lost; want none (the handler ended before Redis slowed)", st.LeasesLost)
	}
}

// TestAttack25dRedisRestartBetweenLeaseAndFailure: Redis restarts, empty,
// after the key was claimed and before the handler's failure is written
// (the lease long enough that no renewal falls between). A failure to
// keep (NOT_FOUND) finds its entry gone and the key free: it claims it
// again and keeps it, its caller gets it, the repeat the replay, one run
// (as the README says of an answer: "its caller gets the answer, and the
// client's retry the replay, rather than UNAVAILABLE and a second run").
// A failure not kept (UNAVAILABLE) reaches its caller, its release finds
// nothing, and the repeat runs.
func TestAttack25dRedisRestartBetweenLeaseAndFailure(t *testing.T) {
	const lease = 4 * time.Second
	r := startRedis(t)
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		if run > 1 {
			return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
		}
		restartRedis(t, r)
		if order == "restart-kept" {
			return nil, status.Error(codes.NotFound, "no such sku")
		}
		return nil, status.Error(codes.Unavailable, "warehouse busy")
	})
	g, cl := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "restartfail25d:")))
	for _, tc := range []struct {
		order string
		code  codes.Code
		kept  bool
	}{{"restart-kept", codes.NotFound, true}, {"restart-forgotten", codes.Unavailable, false}} {
		t.Run(tc.order, func(t *testing.T) {
			first := callWithin(cl, tc.order, 10*time.Second)
			if first.code != tc.code || first.replayed {
				t.Fatalf("the first caller got %v; want the handler's %s", first, tc.code)
			}
			again := callWithin(cl, tc.order, 5*time.Second)
			if tc.kept {
				if again.code != codes.NotFound || !again.replayed || srv.count(tc.order) != 1 {
					t.Errorf("the repeat got %v, %d runs; want NOT_FOUND replayed, one run", again, srv.count(tc.order))
				}
				return
			}
			if again.code != codes.OK || again.id != tc.order+"-2" || srv.count(tc.order) != 2 {
				t.Errorf("the repeat got %v, %d runs; want the handler run again (%s-2)", again, srv.count(tc.order), tc.order)
			}
		})
	}
	if st := stats(t, g); st.LeasesLost != 0 || st.NotKept != 0 {
		t.Errorf("stats %+v: want no lease lost, every outcome to keep kept", st)
	}
}

// TestAttack25dRedisRestartUnderAWaiter: a request runs, a repeat with its
// key waits for it (polling Redis), and Redis restarts empty. The README:
// a store that loses its entries "forgets the keys: a repeat runs the
// handler again, even while the first still runs; … its caller gets
// UNAVAILABLE", and the repeat of a request that lost its key "gets the
// outcome of the request that holds the key: one answer per key". The
// waiter takes the free key over and runs (the second run the restart
// allows, and no third); the first, deaf to its context, answers after it,
// finds the key done by the other and answers UNAVAILABLE, not its own
// answer; its caller's retry gets the waiter's answer replayed.
func TestAttack25dRedisRestartUnderAWaiter(t *testing.T) {
	const lease = 4 * time.Second
	r := startRedis(t)
	started, release := make(chan int, 2), make(chan struct{})
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		started <- run
		if run == 1 {
			<-release // deaf to its context
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
	})
	g, cl := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(retryingClient(t, r.addr), "restartwait25d:")))
	// go-redis's own retries, as the other restart tests: without them the
	// waiter's poll on a pooled connection the restart closed is a store
	// error, and StoreErrorRefuse answers it UNAVAILABLE (seen once in a CI run
	// under -race on a loaded machine); the restart's forgetting is the
	// point here, not the connection it cut.
	first, waiter := make(chan answered, 1), make(chan answered, 1)
	go func() { first <- callWithin(cl, "rw", 10*time.Second) }()
	if n := <-started; n != 1 {
		t.Fatalf("run %d started first", n)
	}
	go func() { waiter <- callWithin(cl, "rw", 10*time.Second) }()
	eventually(t, "the repeat waits", func() bool { return stats(t, g).Waited == 1 })
	restartRedis(t, r)
	select {
	case n := <-started:
		if n != 2 {
			t.Fatalf("run %d started; want the waiter's, 2", n)
		}
	case w := <-waiter:
		close(release)
		t.Fatalf("the waiter answered %v without running: want it to take the forgotten key over", w)
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the waiter did not take the forgotten key over")
	}
	w := <-waiter
	close(release)
	f := <-first
	if w.code != codes.OK || w.id != "rw-2" {
		t.Errorf("the waiter got %v; want its own run's rw-2", w)
	}
	if f.code != codes.Unavailable || !strings.Contains(f.msg, "lost its hold") {
		t.Errorf("the first caller got %v; want UNAVAILABLE, lost its hold (the key is the waiter's)", f)
	}
	if again := callWithin(cl, "rw", 5*time.Second); again.id != "rw-2" || !again.replayed {
		t.Errorf("the first caller's retry got %v; want rw-2 replayed", again)
	}
	if n := srv.count("rw"); n != 2 {
		t.Errorf("the handler ran %d times; want 2 (the restart forgot the key once)", n)
	}
}
