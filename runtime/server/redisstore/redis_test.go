package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

func TestStore(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	s := New(client(t, r.addr), "test:")
	fp1, fp2 := server.Fingerprint{1}, server.Fingerprint{2}
	c, err := s.Claim(ctx, "a", "t1", fp1, time.Second)
	if err != nil || c.State != server.Claimed {
		t.Fatalf("first claim: %+v %v", c, err)
	}
	if c, err := s.Claim(ctx, "a", "t2", fp2, time.Second); err != nil || c.State != server.Pending || c.Fingerprint != fp1 {
		t.Fatalf("second claim: %+v %v, want Pending with the first's fingerprint", c, err)
	}
	if err := s.Renew(ctx, "a", "t2", time.Second); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("a non-owner renewed: %v", err)
	}
	if err := s.Complete(ctx, "a", "t2", []byte("no"), time.Minute); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("a non-owner completed: %v", err)
	}
	if err := s.Complete(ctx, "a", "t", []byte("no"), time.Minute); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("a prefix of the owner's token completed: %v", err)
	}
	if err := s.Release(ctx, "a", "t2"); err != nil {
		t.Error(err)
	}
	if err := s.Renew(ctx, "a", "t1", time.Second); err != nil {
		t.Error(err)
	}
	resp := []byte{0, 1, 2, 0xff} // any bytes, NUL included
	if err := s.Complete(ctx, "a", "t1", resp, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "a", "t3", fp2, time.Second); err != nil || c.State != server.Done || !bytes.Equal(c.Outcome, resp) || c.Fingerprint != fp1 {
		t.Fatalf("claim of a done key: %+v %v", c, err)
	}
	if err := s.Release(ctx, "a", "t1"); err != nil {
		t.Error(err)
	}
	if err := s.Renew(ctx, "a", "t1", time.Second); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("the former owner renewed a done entry: %v", err)
	}
	if c, _ := s.Claim(ctx, "a", "t3", fp1, time.Second); c.State != server.Done {
		t.Error("release by the former owner deleted the done entry")
	}
	// A lapsed lease: the key is free again, and the old owner can neither
	// complete nor release the new owner's entry.
	_, _ = s.Claim(ctx, "c", "old", fp1, 30*time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	if c, _ := s.Claim(ctx, "c", "new", fp1, time.Second); c.State != server.Claimed {
		t.Fatalf("claim after the lease lapsed: %+v", c)
	}
	if err := s.Complete(ctx, "c", "old", []byte("x"), time.Minute); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("old owner completed: %v", err)
	}
	_ = s.Release(ctx, "c", "old")
	if c, _ := s.Claim(ctx, "c", "x", fp1, time.Second); c.State != server.Pending {
		t.Errorf("old owner released the new owner's key: %+v", c)
	}
	// Done entries expire after their TTL.
	_, _ = s.Claim(ctx, "d", "td", fp1, time.Second)
	_ = s.Complete(ctx, "d", "td", []byte("x"), 30*time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	if c, _ := s.Claim(ctx, "d", "x", fp1, time.Second); c.State != server.Claimed {
		t.Errorf("done entry outlived its TTL: %+v", c)
	}
	// A key that holds something else is an error, not an entry.
	if err := client(t, r.addr).Set(ctx, "test:e", "foreign", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "e", "x", fp1, time.Second); err == nil || !strings.Contains(err.Error(), "test:e") {
		t.Errorf("claim of a foreign value: %v, want an error naming the key", err)
	}
}

// TestTwoReplicasRunOnce: two servers sharing one Redis, each with its own
// Redis client, receive concurrent duplicates of several keys: the handler
// runs exactly once per key, across both.
func TestTwoReplicasRunOnce(t *testing.T) {
	r := startRedis(t)
	var runs sync.Map // key → *atomic.Int64
	slow := func(ctx context.Context, req *inventoryv1.ReserveStockRequest) error {
		n, _ := runs.LoadOrStore(req.GetOrderId(), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil
	}
	// Each replica's Redis client opens its connections before the
	// duplicates arrive: go-redis sends a new connection's handshake at its
	// first command, and 20 handshakes at once on a loaded machine can
	// outlast StoreTimeout (500 ms), which refuses the request instead of
	// testing the claim.
	const keys, perKey = 5, 8
	var clients [2]inventoryv1.InventoryServiceClient
	var servers [2]*reserver
	for i := range 2 {
		servers[i] = &reserver{hook: slow, answer: fmt.Sprint("replica", i)}
		_, clients[i] = guarded(t, servers[i], reserveStockPolicy(300*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(New(warmClient(t, r.addr, keys*perKey/2), "replicas:")))
	}
	answers := make([]sync.Map, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for i := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := reserve(t, clients[i%2], fmt.Sprintf("o-%d", k), 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				answers[k].Store(resp.GetReservationId(), true)
			}()
		}
	}
	wg.Wait()
	total := servers[0].runs.Load() + servers[1].runs.Load()
	if total != keys {
		t.Errorf("handler ran %d times for %d keys × %d duplicates on two replicas, want %d", total, keys, perKey, keys)
	}
	for k := range keys {
		n := 0
		answers[k].Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Errorf("key o-%d got %d different answers, want 1", k, n)
		}
	}
}

// TestRedisStopped: with Redis gone, Refuse answers UNAVAILABLE without
// running the handler; RunWithoutDedup runs it.
func TestRedisStopped(t *testing.T) {
	for _, mode := range []policy.StoreErrorMode{policy.StoreErrorRefuse, policy.StoreErrorRunWithoutDedup} {
		t.Run(mode.String(), func(t *testing.T) {
			r := startRedis(t)
			srv := &reserver{}
			g, c := guarded(t, srv, reserveStockPolicy(300*time.Millisecond, mode), server.WithStore(New(client(t, r.addr), "stop:")))
			for range 2 {
				if _, err := reserve(t, c, "before", time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times before the stop, want 1", n)
			}
			r.stop()
			_, err := reserve(t, c, "after", time.Second)
			want, runs := codes.Unavailable, int64(1)
			if mode == policy.StoreErrorRunWithoutDedup {
				want, runs = codes.OK, 2
			}
			if status.Code(err) != want || srv.runs.Load() != runs {
				t.Errorf("with Redis stopped: %v and %d runs, want %s and %d", err, srv.runs.Load(), want, runs)
			}
			if s := stats(t, g); s.StoreErrors == 0 {
				t.Error("store errors not counted")
			}
		})
	}
}

// TestBlipShorterThanLeaseRunsOnce: Redis is cut or stalled for 300 ms, less
// than the 800 ms lease, while the handler finishes or runs through it. The
// outcome is kept once Redis is back, the caller gets its answer, and a
// repeat made after any unkept entry would have lapsed is replayed: the
// handler ran once. The lease leaves the outcome's write 500 ms or more
// after Redis is back (its holder gives the key up 5/4 of a lease after
// the last renewal, at most a quarter lease before the outage): with a
// 400 ms lease that was 100 to 200 ms, and at load 8 the reconnection and
// the write's retry took longer, so the outcome was not kept and the
// repeat ran the handler again.
func TestBlipShorterThanLeaseRunsOnce(t *testing.T) {
	const lease, outage = 800 * time.Millisecond, 300 * time.Millisecond
	for _, fault := range []string{"cut", "stall"} {
		for _, when := range []string{"finishing", "running"} {
			t.Run(fault+"/"+when, func(t *testing.T) {
				r := startRedis(t)
				p := tcpproxy.Start(t, r.addr)
				started, finish := make(chan struct{}), make(chan struct{})
				var once sync.Once
				srv := &reserver{answer: "r", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
					once.Do(func() { close(started) })
					<-finish
					return nil
				}}
				g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "blip:")))
				first := make(chan error, 1)
				var answer string
				go func() {
					resp, err := reserve(t, c, "o-1", 5*time.Second)
					answer = resp.GetReservationId()
					first <- err
				}()
				<-started
				if fault == "cut" {
					p.Cut()
				} else {
					p.Stall()
				}
				if when == "finishing" {
					time.Sleep(outage / 6)
					close(finish) // the outcome is written while Redis is away
					time.Sleep(outage * 5 / 6)
					p.Restore()
				} else {
					time.Sleep(outage) // renewals fail meanwhile
					p.Restore()
					time.Sleep(lease / 2)
					close(finish)
				}
				if err := <-first; err != nil {
					t.Fatalf("first request: %v, want its answer", err)
				}
				time.Sleep(2 * lease) // an entry not kept would have lapsed
				resp, err := reserve(t, c, "o-1", time.Second)
				if err != nil || resp.GetReservationId() != answer {
					t.Errorf("repeat: %v %v, want the first answer %s", resp.GetReservationId(), err, answer)
				}
				s := stats(t, g)
				if n := srv.runs.Load(); n != 1 {
					t.Errorf("handler ran %d times, want 1 (stats %+v)", n, s)
				}
				if s.StoreErrors == 0 || s.NotKept != 0 || s.LeasesLost != 0 || s.Replayed != 1 {
					t.Errorf("stats %+v: want store errors, nothing lost, one replay", s)
				}
			})
		}
	}
}

// TestLeaseLostCancelsHandler: replica A runs a request and is partitioned
// from Redis for longer than the lease; a repeat reaches replica B, which
// takes the key over once the entry lapses. A's handler is told (its
// context cancelled with ErrLeaseLost) before B's handler starts; A's
// caller gets UNAVAILABLE, not an answer of its own, and its repeat gets
// B's answer: one answer per key. A handler that ignores its context runs
// to the end, but its outcome is never written over B's.
func TestLeaseLostCancelsHandler(t *testing.T) {
	const lease = 300 * time.Millisecond
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprint("honours context ", honours), func(t *testing.T) {
			r := startRedis(t)
			p := tcpproxy.Start(t, r.addr)
			var cancelledAt, bStartedAt atomic.Int64
			started, partitionOver := make(chan struct{}), make(chan struct{})
			a := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
				close(started)
				if honours {
					<-ctx.Done()
					cancelledAt.Store(time.Now().UnixNano())
					if !errors.Is(context.Cause(ctx), server.ErrLeaseLost) {
						t.Errorf("A's handler cancelled with %v, want ErrLeaseLost", context.Cause(ctx))
					}
					return ctx.Err()
				}
				<-partitionOver
				return nil
			}}
			b := &reserver{answer: "b", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
				bStartedAt.Store(time.Now().UnixNano())
				return nil
			}}
			ga, ca := guarded(t, a, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "lost:")))
			_, cb := guarded(t, b, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "lost:")))
			first := make(chan error, 1)
			go func() {
				_, err := reserve(t, ca, "o-1", 5*time.Second)
				first <- err
			}()
			<-started
			p.Stall() // A's partition
			resp, err := reserve(t, cb, "o-1", 3*time.Second)
			if err != nil {
				t.Fatalf("repeat on B: %v", err)
			}
			bAnswer := resp.GetReservationId()
			if honours {
				if ca, bs := cancelledAt.Load(), bStartedAt.Load(); ca == 0 || ca > bs {
					t.Errorf("A's handler cancelled at %d, B's started at %d: A must be told first", ca, bs)
				}
			}
			p.Restore()
			close(partitionOver)
			if err := <-first; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "lost its hold") {
				t.Errorf("A's caller: %v, want UNAVAILABLE saying the lease was lost", err)
			}
			resp, err = reserve(t, ca, "o-1", time.Second)
			if err != nil || resp.GetReservationId() != bAnswer {
				t.Errorf("A's caller repeating: %q %v, want B's answer %q", resp.GetReservationId(), err, bAnswer)
			}
			if n := b.commits.Load(); n != 1 {
				t.Errorf("B committed %d times, want 1", n)
			}
			wantA := int64(0)
			if !honours {
				wantA = 1 // the stated limit: a handler that ignores its context
			}
			if n := a.commits.Load(); n != wantA {
				t.Errorf("A committed %d times, want %d", n, wantA)
			}
			if s := stats(t, ga); s.LeasesLost != 1 {
				t.Errorf("A's stats %+v, want one lease lost", s)
			}
		})
	}
}

// logCounter counts the log records whose message contains each string.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
func (l *logCounter) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// TestSilentStoreBounded: Redis does not answer (the proxy stalls, or
// CLIENT PAUSE), and the client has neither ContextTimeoutEnabled nor a
// read timeout shorter than 3 s. The claim is bounded by StoreTimeout
// (Refuse, within the request's 1 s) or a quarter of the 1 s
// (RunWithoutDedup): Refuse answers UNAVAILABLE well before the deadline,
// RunWithoutDedup runs the handler; each failure is counted, the episode
// logged once. (The pause outlasts the three requests whatever the Guard
// does: each ends by its 1 s deadline.) Once Redis answers, the next
// request runs at once: a claim that Redis executed after the Guard
// stopped waiting was released.
func TestSilentStoreBounded(t *testing.T) {
	for _, fault := range []string{"stall", "pause"} {
		for _, mode := range []policy.StoreErrorMode{policy.StoreErrorRefuse, policy.StoreErrorRunWithoutDedup} {
			t.Run(fault+"/"+mode.String(), func(t *testing.T) {
				r := startRedis(t)
				p := tcpproxy.Start(t, r.addr)
				srv := &reserver{answer: "r"}
				logs := &logCounter{}
				g, c := guarded(t, srv, reserveStockPolicy(time.Second, mode),
					server.WithStore(New(client(t, p.Addr()), "silent:")), server.WithLogger(slog.New(logs)))
				if _, err := reserve(t, c, "warm", time.Second); err != nil { // a connection in the pool
					t.Fatal(err)
				}
				// 3 requests of at most their 1 s deadline each, and 500 ms
				// for the CLIENT PAUSE's own connection on a loaded machine:
				// a pause that ended during a request would let its claim
				// through.
				const pause = 3*time.Second + 500*time.Millisecond
				paused := time.Now()
				if fault == "stall" {
					p.Stall()
				} else if err := client(t, r.addr).Do(context.Background(), "CLIENT", "PAUSE", fmt.Sprint(pause.Milliseconds()), "ALL").Err(); err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					start := time.Now()
					_, err := reserve(t, c, fmt.Sprint("o-", i), time.Second)
					el := time.Since(start)
					// The bound: StoreTimeout under Refuse, a quarter of the
					// 1 s under RunWithoutDedup (and the handler); with 350 ms
					// and 500 ms of slack for -race on a loaded machine, both
					// short of the deadline an unbounded claim would wait for.
					want, limit := codes.Unavailable, server.StoreTimeout+350*time.Millisecond
					if mode == policy.StoreErrorRunWithoutDedup {
						want, limit = codes.OK, time.Second/4+500*time.Millisecond
					}
					if status.Code(err) != want || el > limit {
						t.Errorf("request %d with Redis silent: %v after %s, want %s within %s, short of the 1s deadline", i, err, el, want, limit)
					}
				}
				s := stats(t, g)
				wantRuns := int64(1)
				if mode == policy.StoreErrorRunWithoutDedup {
					wantRuns = 4
				}
				if srv.runs.Load() != wantRuns || s.StoreErrors < 3 || (mode == policy.StoreErrorRunWithoutDedup && s.RanWithoutDedup != 3) {
					t.Errorf("handler ran %d times, want %d; stats %+v", srv.runs.Load(), wantRuns, s)
				}
				if n := logs.count("idempotency store failing"); n != 1 {
					t.Errorf("store failure logged %d times in one episode, want 1", n)
				}
				p.Restore()
				if fault == "pause" {
					time.Sleep(time.Until(paused.Add(pause))) // the pause ends, late claims run and are released
				}
				// The refused keys are free: a repeat runs at once, and once.
				// (4 s: a claim then gets the whole StoreTimeout, so that a
				// Redis busy with the commands queued by the pause does not
				// send this one down RunWithoutDedup on a loaded machine.)
				eventually(t, "a refused key runs once Redis answers", func() bool {
					_, err := reserve(t, c, "o-0", 4*time.Second)
					return err == nil
				})
				if _, err := reserve(t, c, "o-0", 4*time.Second); err != nil {
					t.Fatal(err)
				}
				if n := srv.runs.Load(); n != wantRuns+1 {
					t.Errorf("handler ran %d times, want %d", n, wantRuns+1)
				}
				if n := logs.count("answering again"); n != 1 {
					t.Errorf("recovery logged %d times, want 1", n)
				}
			})
		}
	}
}

// TestWaiterNeverRunsWithoutDedup: a repeat waiting on replica B for the
// request running on replica A loses Redis mid-wait. Even under
// RunWithoutDedup it does not run the handler (the first is known to be
// running): it answers UNAVAILABLE, and the handler ran once.
func TestWaiterNeverRunsWithoutDedup(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	started, finish := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(context.Context, *inventoryv1.ReserveStockRequest) error {
		once.Do(func() { close(started) })
		<-finish
		return nil
	}
	a, b := &reserver{answer: "a", hook: hook}, &reserver{answer: "b", hook: hook}
	_, ca := guarded(t, a, reserveStockPolicy(time.Second, policy.StoreErrorRunWithoutDedup), server.WithStore(New(client(t, r.addr), "wait:")))
	gb, cb := guarded(t, b, reserveStockPolicy(time.Second, policy.StoreErrorRunWithoutDedup), server.WithStore(New(client(t, p.Addr()), "wait:")))
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, ca, "o-1", 5*time.Second)
		first <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, err := reserve(t, cb, "o-1", 3*time.Second)
		waiter <- err
	}()
	eventually(t, "B's repeat waiting", func() bool { return stats(t, gb).Waited == 1 })
	p.Cut()
	if err := <-waiter; status.Code(err) != codes.Unavailable {
		t.Errorf("waiter after losing Redis: %v, want UNAVAILABLE", err)
	}
	close(finish)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := a.runs.Load() + b.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if s := stats(t, gb); s.RanWithoutDedup != 0 {
		t.Errorf("B ran %d requests without dedup", s.RanWithoutDedup)
	}
}
