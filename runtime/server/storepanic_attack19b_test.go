package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// slowPanicStore is a MemoryStore whose Claim, while armed, takes delay
// whatever its context (a store that ignores it), carries the claim out
// and then panics: a store bug met after the Guard stopped waiting.
type slowPanicStore struct {
	Store
	armed atomic.Bool
	delay time.Duration
	done  atomic.Int64 // armed claims carried out
}

func (s *slowPanicStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	if !s.armed.Load() {
		return s.Store.Claim(ctx, key, token, fp, lease)
	}
	time.Sleep(s.delay)
	_, _ = s.Store.Claim(context.Background(), key, token, fp, lease)
	s.done.Add(1)
	panic("boom in claim, late")
}

// TestAttack19bClaimThatPanicsAfterTheWait: a Claim slower than
// StoreTimeout (the Guard stops waiting and answers UNAVAILABLE under
// StoreErrorRefuse, counting one store error) that then carries the claim
// out and panics. The README promises, of a store that panics, that the
// Guard "logs it each time as an error with its stack", and that "A Claim
// that panics has an unknown outcome: the key is released (in case it was
// claimed)". The panic of a claim the Guard no longer waits for reaches
// only the late function of Guard.claim (dedup.go), which neither logged
// it nor released the key for a claim that was abandoned (not cut by the
// request): the stack was lost, and the key stayed pending for 3/2 Lease
// (a repeat with the key waited for a request that never ran).
//
// Fixed in runtime/server/dedup.go, Guard.claim's late func: a panic is
// logged (storePanicked) whatever cut is, and a failed late claim is
// released whether or not the request cut the wait.
func TestAttack19bClaimThatPanicsAfterTheWait(t *testing.T) {
	srv := &inventoryServer{}
	store := &slowPanicStore{Store: NewMemoryStore(100), delay: StoreTimeout + 150*time.Millisecond}
	store.armed.Store(true)
	var log logBuffer
	p := inventoryPolicy()
	p.Methods[1].Dedup.OnStoreError = policy.StoreErrorRefuse
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(store), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	_, err := reserve(t, client, "o-1")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a claim slower than StoreTimeout: %v, want UNAVAILABLE", err)
	}
	eventually(t, "the late claim carried out", func() bool { return store.done.Load() == 1 })
	store.armed.Store(false)
	// The panic is logged after the claim was carried out, by the late
	// func: waited for (at load 20 a fixed 50 ms did not always cover it).
	logged := func() bool {
		s := log.String()
		return strings.Contains(s, "idempotency store panicked") && strings.Contains(s, "boom in claim, late")
	}
	for end := time.Now().Add(2 * time.Second); !logged() && time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
	}
	if !logged() {
		t.Errorf("the late claim's panic is not in the log (the README: logged each time, with its stack):\n%s", log.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err = client.ReserveStock(withKey(ctx, "o-1"), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
	if err != nil || srv.reserveCalls.Load() != 1 {
		t.Errorf("the retry once the store is mended: %v (handler ran %d); want it run at once, the panicked claim's key released", err, srv.reserveCalls.Load())
	}
	if s := stats(t, g); s.StoreErrors < 1 || s.StoreErrors > 2 {
		t.Errorf("StoreErrors %d, want the claim's silence once (and its panic at most once)", s.StoreErrors)
	}
}

// TestAttack19bPanicsCountedOnceEach: eight concurrent requests on
// eight keys, each meeting a store whose Claim panics (before or after
// carrying it out), then eight whose Complete panics, behind the Guard's
// shedding (ReserveStock's critical limit is 8 in flight, all taken): each panic is
// counted once in StoreErrors and logged once with its stack, a claim
// that panicked never runs the handler (StoreErrorRefuse), a Complete
// that panicked leaves the caller its answer (NotKept once each), and
// every place in flight is given back.
func TestAttack19bPanicsCountedOnceEach(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(map[bool]string{false: "before", true: "after"}[after], func(t *testing.T) {
			srv := &inventoryServer{}
			g, client, store, log := panicking(t, srv, time.Second, policy.StoreErrorRefuse)
			run := func(prefix string, want codes.Code) {
				t.Helper()
				var wg sync.WaitGroup
				var wrong atomic.Int64
				for i := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := reserve(t, client, prefix+itoa(int64(i))); status.Code(err) != want {
							wrong.Add(1)
							t.Logf("%s%d: %v, want %v", prefix, i, err, want)
						}
					}()
				}
				wg.Wait()
				if n := wrong.Load(); n > 0 {
					t.Errorf("%d of 8 requests did not answer %v", n, want)
				}
			}
			store.set("claim", after)
			run("c", codes.Unavailable)
			if n := srv.reserveCalls.Load(); n != 0 {
				t.Errorf("the handler ran %d times behind panicking claims, want 0", n)
			}
			s := stats(t, g)
			if s.StoreErrors != 8 || panicsLogged(log) != 8 {
				t.Errorf("claims: StoreErrors %d, %d panics logged; want 8 and 8", s.StoreErrors, panicsLogged(log))
			}
			store.set("complete", after)
			run("d", codes.OK)
			eventually(t, "every place in flight given back", func() bool { return stats(t, g).InFlight == 0 })
			s = stats(t, g)
			if n := srv.reserveCalls.Load(); n != 8 || s.StoreErrors != 16 || s.NotKept != 8 ||
				panicsLogged(log) != 16 {
				t.Errorf("completes: handler ran %d, StoreErrors %d, NotKept %d, %d panics logged; want 8, 16, 8, 16",
					n, s.StoreErrors, s.NotKept, panicsLogged(log))
			}
			store.set("", false)
			// Claims that panicked are released: their keys run at once now.
			_, err := reserve(t, client, "c0")
			if err != nil || srv.reserveCalls.Load() != 9 {
				t.Errorf("a claim's key once the store is mended: %v, ran %d; want it run (the key released)", err, srv.reserveCalls.Load())
			}
		})
	}
}

// panicsLogged is the number of store panics the Guard logged.
func panicsLogged(log *logBuffer) int {
	return strings.Count(log.String(), "msg=\"idempotency store panicked")
}
