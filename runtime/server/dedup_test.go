package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
}

func reserve(t testing.TB, client inventoryv1.InventoryServiceClient, key string, opts ...grpc.CallOption) (*inventoryv1.ReserveStockResponse, error) {
	t.Helper()
	return client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), key), &inventoryv1.ReserveStockRequest{OrderId: key, Sku: "a", Units: 1}, opts...)
}

func TestDedupSequentialRepeatsReplayed(t *testing.T) {
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	first, err := reserve(t, client, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		var trailer metadata.MD
		again, err := reserve(t, client, "o-1", grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(first, again) {
			t.Errorf("repeat answered %v, want the first answer %v", again, first)
		}
		if got := trailer.Get(ReplayedHeader); len(got) != 1 || got[0] != "true" {
			t.Errorf("repeat's %s trailer: %v", ReplayedHeader, got)
		}
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("handler ran %d times for one key, want 1", n)
	}
	// Another key runs; no key at all runs every time.
	if _, err := reserve(t, client, "o-2"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.ReserveStock(ctxTimeout(t, time.Second), &inventoryv1.ReserveStockRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 4 {
		t.Errorf("handler ran %d times, want 4", n)
	}
	if s := stats(t, g); s.Replayed != 5 {
		t.Errorf("replayed %d, want 5", s.Replayed)
	}
}

func TestDedupConcurrentRepeatsWaitForTheFirst(t *testing.T) {
	srv := &inventoryServer{}
	started := make(chan struct{})
	var once sync.Once
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		once.Do(func() { close(started) })
		time.Sleep(100 * time.Millisecond)
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
	}
	p := inventoryPolicy()
	p.Shedding = nil // waiters hold a place in flight; this test is not about shedding
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := reserve(t, client, "o-9")
			if err == nil && resp.GetReservationId() != "r-o-9" {
				err = errors.New("wrong answer " + resp.GetReservationId())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times for %d concurrent duplicates, want 1", c, n)
	}
	if s := stats(t, g); s.Replayed != n-1 || s.Waited == 0 {
		t.Errorf("waited %d replayed %d, want %d replayed, some after waiting", s.Waited, s.Replayed, n-1)
	}
}

// TestDedupWaiterBoundedByItsDeadline: a repeat whose deadline ends while
// the first still runs gets DEADLINE_EXCEEDED, and the handler never runs
// twice.
func TestDedupWaiterBoundedByItsDeadline(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		<-release
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "o-5")
		first <- err
	}()
	eventually(t, "first running", func() bool { return srv.reserveCalls.Load() == 1 })
	ctx := withKey(ctxTimeout(t, 150*time.Millisecond), "o-5")
	start := time.Now()
	_, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-5", Sku: "a", Units: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("waiting repeat: %v, want DEADLINE_EXCEEDED", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("repeat waited %s", el)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(t, client, "o-5"); err != nil {
		t.Fatal(err)
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times, want 1", c)
	}
	if s := stats(t, g); s.Waited != 1 || s.Replayed != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestDedupFinalStatusKeptTransientNot: an answer (FAILED_PRECONDITION) is
// replayed; a transient failure (UNAVAILABLE) frees the key so the repeat
// runs.
func TestDedupFinalStatusKeptTransientNot(t *testing.T) {
	srv := &inventoryServer{}
	var mu sync.Mutex
	answer := status.Error(codes.FailedPrecondition, "no stock")
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		return nil, answer
	}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for range 3 {
		_, err := reserve(t, client, "o-final")
		if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != "no stock" {
			t.Fatalf("got %v, want the stored FAILED_PRECONDITION", err)
		}
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times for a final answer, want 1", c)
	}
	mu.Lock()
	answer = status.Error(codes.Unavailable, "database down")
	mu.Unlock()
	for range 3 {
		if _, err := reserve(t, client, "o-transient"); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
	}
	if c := srv.reserveCalls.Load(); c != 4 {
		t.Errorf("handler ran %d times, want 1 + 3 (transient failures are not kept)", c)
	}
	// Once it succeeds, the success is kept.
	mu.Lock()
	answer = nil
	mu.Unlock()
	srv.onReserve = nil
	for range 2 {
		if _, err := reserve(t, client, "o-transient"); err != nil {
			t.Fatal(err)
		}
	}
	if c := srv.reserveCalls.Load(); c != 5 {
		t.Errorf("handler ran %d times, want 5", c)
	}
}

// brokenStore fails every operation, like a store that cannot be reached.
// (The Redis tests stop a real Redis instead.)
type brokenStore struct{}

var errUnreachable = errors.New("connection refused")

func (brokenStore) Claim(context.Context, string, string, Fingerprint, time.Duration) (Claim, error) {
	return Claim{}, errUnreachable
}
func (brokenStore) Renew(context.Context, string, string, time.Duration) error { return errUnreachable }
func (brokenStore) Complete(context.Context, string, string, []byte, time.Duration) error {
	return errUnreachable
}
func (brokenStore) Release(context.Context, string, string) error { return errUnreachable }

func TestDedupStoreUnreachable(t *testing.T) {
	for _, mode := range []policy.StoreErrorMode{policy.StoreErrorRefuse, policy.StoreErrorRunWithoutDedup} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := &inventoryServer{}
			p := inventoryPolicy()
			p.Methods[1].Dedup.OnStoreError = mode
			g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(brokenStore{}))
			_, err := reserve(t, client, "o-1")
			s := stats(t, g)
			switch mode {
			case policy.StoreErrorRefuse:
				if status.Code(err) != codes.Unavailable || srv.reserveCalls.Load() != 0 {
					t.Errorf("policy.StoreErrorRefuse: %v, handler ran %d times; want UNAVAILABLE and 0", err, srv.reserveCalls.Load())
				}
			case policy.StoreErrorRunWithoutDedup:
				if err != nil || srv.reserveCalls.Load() != 1 || s.RanWithoutDedup != 1 {
					t.Errorf("policy.StoreErrorRunWithoutDedup: %v, handler ran %d times; want success and 1", err, srv.reserveCalls.Load())
				}
			}
			if s.StoreErrors == 0 {
				t.Error("store errors not counted")
			}
		})
	}
}

// TestDedupLeaseTakenOverAfterCrash: an owner that never completes (its
// replica died) holds the key only for its lease.
func TestDedupLeaseTakenOverAfterCrash(t *testing.T) {
	store := NewMemoryStore(10)
	ctx := context.Background()
	key := storeKey(reserveStock, "", "o-1")
	fp, _ := fingerprint(&inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
	if c, _ := store.Claim(ctx, key, "dead-owner", fp, 50*time.Millisecond); c.State != Claimed {
		t.Fatal("claim failed")
	}
	srv := &inventoryServer{}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
	start := time.Now()
	if _, err := reserve(t, client, "o-1"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Errorf("ran after %s, before the dead owner's lease ended", el)
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times, want 1", c)
	}
	if err := store.Complete(ctx, key, "dead-owner", nil, time.Minute); !errors.Is(err, ErrNotOwner) {
		t.Errorf("the dead owner completed after losing its lease: %v", err)
	}
}

// TestDedupLeaseRenewedWhileRunning: a handler running longer than its
// lease keeps the key, so a repeat still waits instead of running.
func TestDedupLeaseRenewedWhileRunning(t *testing.T) {
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		time.Sleep(1500 * time.Millisecond)
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	p := inventoryPolicy()
	// Renewed every 150ms (a quarter of the lease); the store keeps the
	// pending entry 900ms (3/2 of it) past each renewal, and the owner
	// gives up 750ms (5/4) after its last one. So without renewals the
	// entry lapses before the repeat arrives at 1s, well inside the 1.5s
	// handler; with them a lapse needs a renewal 600ms late, more than the
	// scheduler of a loaded machine (two cores, the race detector, other
	// packages' tests beside) delays a timer. (A 300ms lease, with its
	// 300ms of slack, lapsed there.)
	p.Methods[1].Dedup.Lease = 600 * time.Millisecond
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * time.Second)
			if _, err := reserve(t, client, "o-long"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times, want 1: the lease was not renewed (stats %+v)", c, stats(t, g))
	}
}

func TestOutcomeEncoding(t *testing.T) {
	for _, o := range []outcome{
		{response: []byte("abc")},
		{response: []byte{}},
		{status: status.New(codes.NotFound, "x").Proto()},
		{response: []byte{0, 1}, header: metadata.Pairs("a", "1", "a", "2"), trailer: metadata.Pairs("t", "\x00bin")},
	} {
		b, err := o.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeOutcome(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.response) != string(o.response) || !proto.Equal(got.status, o.status) ||
			!equalMD(got.header, o.header) || !equalMD(got.trailer, o.trailer) {
			t.Errorf("round trip of %+v gave %+v", o, got)
		}
	}
	for _, b := range [][]byte{nil, []byte("x"), {0x12, 0x02, 0xff, 0xff}, {0x0a, 0x05}} {
		if _, err := decodeOutcome(b); err == nil {
			t.Errorf("decodeOutcome(%q) accepted", b)
		}
	}
}

func equalMD(a, b metadata.MD) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}
