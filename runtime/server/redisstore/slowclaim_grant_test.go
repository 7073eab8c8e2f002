package redisstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestGrantClaimAnsweredAfterTheLease: a real Redis whose every reply is
// held 140 ms (not refusing, not silent: it carries each command out at
// once and answers late), under a 100 ms lease. A claim answered later
// than the lease has, by then, a lease the keeper gives up at once (5/4
// of it after the claim was sent) and an entry that lapses 3/2 of it
// after: a handler started then runs without a hold on its key, and a
// retry with the same key, finding the entry gone, runs it again, once
// per attempt. Such a claim is the store failing (it cannot hold the
// lease), and the method's OnStoreError decides: under StoreErrorRefuse,
// four attempts with one key are each refused UNAVAILABLE, naming the
// lease, within their deadline, and the handler never runs; each claim is
// released, so that once Redis answers in time the key runs once and its
// repeat replays.
func TestGrantClaimAnsweredAfterTheLease(t *testing.T) {
	const lease, delay, deadline = 100 * time.Millisecond, 140 * time.Millisecond, time.Second
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "late", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		time.Sleep(60 * time.Millisecond) // commits whatever its context says: the worst case
		return nil
	}}
	var mu sync.Mutex
	var held []time.Duration // how long the Guard held each request
	timer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			held = append(held, time.Since(start))
		}()
		return h(ctx, req)
	}
	s := New(client(t, p.Addr()), "slowclaim:")
	g, c := guardedBehind(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), []grpc.UnaryServerInterceptor{timer}, server.WithStore(s))
	loadScripts(t, s)
	p.DelayReplies(delay)
	for i := range 4 {
		_, err := reserve(t, c, "sc-1", deadline)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "lease") {
			t.Errorf("attempt %d: %v, want UNAVAILABLE naming the lease", i, err)
		}
	}
	if n := srv.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times behind claims answered after the lease, want 0", n)
	}
	mu.Lock()
	for i, d := range held {
		if d >= deadline {
			t.Errorf("attempt %d: held %v by the Guard, past its %v deadline", i, d, deadline)
		}
	}
	mu.Unlock()
	if st := stats(t, g); st.StoreErrors < 4 || st.LeasesLost != 0 {
		t.Errorf("stats %+v: want each late claim counted as a store error, no lease lost (none was held)", st)
	}
	p.DelayReplies(0)
	eventually(t, "the key run once Redis answers in time", func() bool {
		resp, err := reserve(t, c, "sc-1", deadline)
		return err == nil && resp.GetReservationId() == "late-1"
	})
	if resp, err := reserve(t, c, "sc-1", deadline); err != nil || resp.GetReservationId() != "late-1" || srv.runs.Load() != 1 {
		t.Errorf("the repeat: %q %v after %d runs, want the replay of late-1 after one run", resp.GetReservationId(), err, srv.runs.Load())
	}
}

// TestGrantSlowClaimCutThenRepeat: Redis answers every command 150 ms
// late (carrying it out at once). The first request, with a 100 ms
// deadline, is cut waiting for its claim, which Redis carried out; a
// repeat with the same key sent 100 ms later, with two seconds, finds the
// first's pending entry, waits, takes the key once the first's late claim
// is released, and runs the handler: once, answered within its deadline.
// A third request replays that answer. The first never ran the handler,
// and the cut claim is not counted as the store's failure.
//
// Each reply has 350 ms to spare within StoreTimeout (500 ms), past which
// the Guard counts even a cut claim's late answer as the store's failure:
// with 300 ms replies, 200 ms, and under load one store error was counted.
// The first request's deadline stays shorter than a reply, so that it is
// cut waiting for its claim however fast the machine is, and it is sent on
// a connection made first, so that its time goes to the claim.
func TestGrantSlowClaimCutThenRepeat(t *testing.T) {
	const delay, firstDeadline = 150 * time.Millisecond, 100 * time.Millisecond
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "cut"}
	// Connections opened before Redis slows down: a new one's handshake
	// would cost round trips of its own, slower than StoreTimeout here.
	// (go-redis sends its handshake at a connection's first command: six
	// commands that block together open six and send it on each.)
	rc := warmClient(t, p.Addr(), 6)
	s := New(rc, "slowcut:")
	g, c := guarded(t, srv, reserveStockPolicy(2*time.Second, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	// The gRPC connection made first, by a method the handler does not
	// count, so that the first request's time goes to its claim.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetStock to connect: %v, want UNIMPLEMENTED", err)
	}
	p.DelayReplies(delay)

	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, c, "cut-1", firstDeadline)
		first <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	resp, err := reserve(t, c, "cut-1", 2*time.Second)
	took := time.Since(start)
	if err := <-first; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("the first request: %v, want DEADLINE_EXCEEDED", err)
	}
	if err != nil || resp.GetReservationId() != "cut-1" {
		t.Fatalf("the repeat: %q %v after %v, want cut-1 within its deadline", resp.GetReservationId(), err, took)
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	again, err := reserve(t, c, "cut-1", 2*time.Second)
	if err != nil || again.GetReservationId() != "cut-1" || srv.runs.Load() != 1 {
		t.Errorf("the third: %q %v after %d runs, want the replay of cut-1", again.GetReservationId(), err, srv.runs.Load())
	}
	if st := stats(t, g); st.StoreErrors != 0 || st.LeasesLost != 0 || st.Replayed != 1 {
		t.Errorf("stats %+v: want no store error, no lease lost, one replay", st)
	}
}
