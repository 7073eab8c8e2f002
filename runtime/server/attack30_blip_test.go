package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// blipStore is a MemoryStore that, while down, refuses every operation at
// once (a store that answers with an error: a Redis refusing connections,
// not one that is silent), and counts the operations it refused.
type blipStore struct {
	*MemoryStore
	down    atomic.Bool
	refused atomic.Int64
}

var errBlip = errors.New("attack30: store down")

func (s *blipStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return Claim{}, errBlip
	}
	return s.MemoryStore.Claim(ctx, key, token, fp, lease)
}

func (s *blipStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if s.down.Load() {
		s.refused.Add(1)
		return errBlip
	}
	return s.MemoryStore.Renew(ctx, key, token, lease)
}

func (s *blipStore) Complete(ctx context.Context, key, token string, outcome []byte, ttl time.Duration) error {
	if s.down.Load() {
		s.refused.Add(1)
		return errBlip
	}
	return s.MemoryStore.Complete(ctx, key, token, outcome, ttl)
}

func (s *blipStore) Release(ctx context.Context, key, token string) error {
	if s.down.Load() {
		s.refused.Add(1)
		return errBlip
	}
	return s.MemoryStore.Release(ctx, key, token)
}

// attack30BlipRig serves ReserveStock (lease 800 ms) under mode on a
// blipStore, its handler blocked until release is closed (the first run
// only; later runs answer at once), and returns the store, the Guard, a
// client and the handler's start signal.
func attack30BlipRig(t *testing.T, mode policy.StoreErrorMode) (*blipStore, *Guard, inventoryv1.InventoryServiceClient, *inventoryServer, chan struct{}, chan struct{}) {
	t.Helper()
	st := &blipStore{MemoryStore: NewMemoryStore(100)}
	srv := &inventoryServer{}
	started, release := make(chan struct{}), make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() == 1 {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId() + "-" + itoa(srv.reserveCalls.Load())}, nil
	}
	p := inventoryPolicy()
	p.Methods[1].Dedup.Lease = 800 * time.Millisecond
	p.Methods[1].Dedup.OnStoreError = mode
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(st))
	return st, g, client, srv, started, release
}

// TestAttack30RepeatDuringABlipIsRefusedAndReplayedAfter: the README's
// StoreErrorRefuse, "answers UNAVAILABLE without running the handler,
// which the caller may retry later with the same key", and "A store
// outage shorter than Lease never causes a second run". A first request
// runs; the store refuses every operation for a moment shorter than the
// lease; a repeat arriving then is answered UNAVAILABLE, its handler not
// run; once the store is back, the first's answer is kept and the
// repeat's retry is replayed it: one run.
func TestAttack30RepeatDuringABlipIsRefusedAndReplayedAfter(t *testing.T) {
	st, g, client, srv, started, release := attack30BlipRig(t, policy.StoreErrorRefuse)
	first := make(chan error, 1)
	var firstResp atomic.Value
	go func() {
		resp, err := reserve(t, client, "o-blip")
		if err == nil {
			firstResp.Store(resp.GetReservationId())
		}
		first <- err
	}()
	<-started
	st.down.Store(true)
	_, err := reserve(t, client, "o-blip")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("repeat during the blip: %v, want UNAVAILABLE", err)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times during the blip, want 1", n)
	}
	st.down.Store(false) // back well inside the 800 ms lease
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	var trailer metadata.MD
	again, err := reserve(t, client, "o-blip", grpc.Trailer(&trailer))
	if err != nil {
		t.Fatalf("retry after the blip: %v", err)
	}
	if again.GetReservationId() != firstResp.Load() || len(trailer.Get(ReplayedHeader)) == 0 {
		t.Errorf("retry after the blip got %q (replayed %v), want the first's %q replayed", again.GetReservationId(), trailer.Get(ReplayedHeader), firstResp.Load())
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	s := stats(t, g)
	if s.StoreErrors == 0 || s.RanWithoutDedup != 0 || s.LeasesLost != 0 || s.NotKept != 0 || s.Replayed != 1 {
		t.Errorf("stats %+v: want StoreErrors > 0, RanWithoutDedup 0, LeasesLost 0, NotKept 0, Replayed 1", s)
	}
	t.Logf("store refused %d operations; stats: store errors %d, replayed %d", st.refused.Load(), s.StoreErrors, s.Replayed)
}

// TestAttack30WaiterDuringABlipNeverRunsWithoutDedup: the README's "A
// repeat that was already waiting for a running request never runs
// without dedup: it answers UNAVAILABLE", under StoreErrorRunWithoutDedup,
// against "StoreErrorRunWithoutDedup runs every repeat that arrives while
// the store cannot be reached" for one that arrives then. A waiter whose
// polls meet a refusing store answers UNAVAILABLE, the handler not run
// again; a repeat that arrives during the blip runs (counted in
// RanWithoutDedup); once the store is back a retry is replayed the first's
// kept answer.
func TestAttack30WaiterDuringABlipNeverRunsWithoutDedup(t *testing.T) {
	st, g, client, srv, started, release := attack30BlipRig(t, policy.StoreErrorRunWithoutDedup)
	first := make(chan error, 1)
	var firstResp atomic.Value
	go func() {
		resp, err := reserve(t, client, "o-wait")
		if err == nil {
			firstResp.Store(resp.GetReservationId())
		}
		first <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "o-wait")
		waiter <- err
	}()
	eventually(t, "the repeat waits", func() bool { return stats(t, g).Waited == 1 })
	st.down.Store(true)
	var werr error
	select {
	case werr = <-waiter:
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter did not answer during the blip")
	}
	if status.Code(werr) != codes.Unavailable {
		t.Errorf("waiter during the blip: %v, want UNAVAILABLE", werr)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the waiter ran the handler: %d runs, want 1", n)
	}
	// A repeat that arrives now runs without dedup, as the README says.
	if _, err := reserve(t, client, "o-wait"); err != nil {
		t.Errorf("repeat arriving during the blip: %v, want it run without dedup", err)
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("%d runs after a repeat arrived during the blip, want 2", n)
	}
	st.down.Store(false)
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	var trailer metadata.MD
	again, err := reserve(t, client, "o-wait", grpc.Trailer(&trailer))
	if err != nil || again.GetReservationId() != firstResp.Load() || len(trailer.Get(ReplayedHeader)) == 0 {
		t.Errorf("retry after the blip: %q, %v (replayed %v); want the first's %q replayed", again.GetReservationId(), err, trailer.Get(ReplayedHeader), firstResp.Load())
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
	if s := stats(t, g); s.RanWithoutDedup != 1 || s.LeasesLost != 0 || s.NotKept != 0 {
		t.Errorf("stats %+v: want RanWithoutDedup 1, LeasesLost 0, NotKept 0", s)
	}
}

// TestAttack30WaitingDuplicatesFillTheLowLimit: the README's known limit,
// "A waiting repeat keeps its place in flight for the shedding limits
// while it waits: a burst of duplicates of one slow request can fill the
// low-priority limit", and the cumulative limits ("a low request is
// refused from [Low] requests in flight"). ReserveStock is critical,
// lowered to low by its callers (Low: 2): a running request and one
// waiting duplicate hold both low places, so a third low request of
// another key is shed (UNAVAILABLE with the SHED mark, its handler not
// run) while a high one (GetStock) is admitted; once the first answers,
// the waiter is replayed and every place comes back.
func TestAttack30WaitingDuplicatesFillTheLowLimit(t *testing.T) {
	_, g, client, srv, started, release := attack30BlipRig(t, policy.StoreErrorRefuse)
	low := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(withKey(ctxTimeout(t, 5*time.Second), key), runtime.PriorityHeader, "low")
	}
	req := func(key string) *inventoryv1.ReserveStockRequest {
		return &inventoryv1.ReserveStockRequest{OrderId: key, Sku: "a", Units: 1}
	}
	first, waiter := make(chan error, 1), make(chan error, 1)
	go func() { _, err := client.ReserveStock(low("o-1"), req("o-1")); first <- err }()
	<-started
	go func() { _, err := client.ReserveStock(low("o-1"), req("o-1")); waiter <- err }()
	eventually(t, "the duplicate waits", func() bool { return stats(t, g).Waited == 1 })
	if s := stats(t, g); s.InFlight != 2 {
		t.Errorf("in flight %d with one running and one waiting, want 2", s.InFlight)
	}
	_, err := client.ReserveStock(low("o-2"), req("o-2"))
	if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
		t.Errorf("a third low request: %v (reasons %v), want UNAVAILABLE marked %s", err, reasons(err), runtime.ShedReason)
	}
	if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Errorf("a high request beside two low places: %v, want it admitted", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("ReserveStock ran %d times, want 1 (the shed request never reaches it)", n)
	}
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	s := stats(t, g)
	if s.Admitted[PriorityLow] != 2 || s.Shed[PriorityLow] != 1 || s.Admitted[PriorityHigh] != 1 || s.Replayed != 1 || s.Waited != 1 {
		t.Errorf("stats: admitted %v, shed %v, replayed %d, waited %d; want low admitted 2 and shed 1, high admitted 1, replayed 1, waited 1",
			s.Admitted, s.Shed, s.Replayed, s.Waited)
	}
}
