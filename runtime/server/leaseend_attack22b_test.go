package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// downStore is a MemoryStore that fails every operation while down (a
// store partitioned from this replica).
type downStore struct {
	*MemoryStore
	down atomic.Bool
}

var errDown = errors.New("store partitioned")

func (s *downStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	if s.down.Load() {
		return Claim{}, errDown
	}
	return s.MemoryStore.Claim(ctx, key, token, fp, lease)
}

func (s *downStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if s.down.Load() {
		return errDown
	}
	return s.MemoryStore.Renew(ctx, key, token, lease)
}

func (s *downStore) Complete(ctx context.Context, key, token string, o []byte, ttl time.Duration) error {
	if s.down.Load() {
		return errDown
	}
	return s.MemoryStore.Complete(ctx, key, token, o, ttl)
}

func (s *downStore) Release(ctx context.Context, key, token string) error {
	if s.down.Load() {
		return errDown
	}
	return s.MemoryStore.Release(ctx, key, token)
}

// TestAttack22bAnswerOfAHandlerThatEndsAsItsLeaseIsLost: the store
// becomes unreachable while a deduplicated handler runs; 5/4 Lease after
// the last renewal the Guard gives the lease up and cancels the handler,
// whose commit was already under way: it returns its answer at once,
// while the entry still has Lease/4 to live, so no other request can hold
// the key. Its outcome cannot be written. The caller was answered
// UNAVAILABLE ("lost its hold on the idempotency key"), and its retry,
// once the entry lapsed, ran the handler a second time; had the handler
// ended a moment sooner, before the lease was given up, the caller would
// have got the answer (NotKept), as after any outage longer than the
// lease. Either way the answer is the handler's: the caller gets it,
// counted in NotKept.
func TestAttack22bAnswerOfAHandlerThatEndsAsItsLeaseIsLost(t *testing.T) {
	const lease = 400 * time.Millisecond
	p := inventoryPolicy()
	p.Methods[1].Dedup.Lease = lease
	store := &downStore{MemoryStore: NewMemoryStore(10)}
	srv := &inventoryServer{}
	var commits atomic.Int64
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		store.down.Store(true)
		<-ctx.Done() // the commit was under way when the cancel came
		if !errors.Is(context.Cause(ctx), ErrLeaseLost) {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		commits.Add(1)
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(store))
	resp, err := reserve(t, client, "o-end")
	if err != nil || resp.GetReservationId() != "r-o-end" {
		t.Fatalf("%v, %v; want the handler's answer, the only effect made", resp, err)
	}
	if s := stats(t, g); s.LeasesLost != 1 || s.NotKept != 1 {
		t.Errorf("leases lost %d, not kept %d; want 1 and 1", s.LeasesLost, s.NotKept)
	}
	if n := commits.Load(); n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
	// The README's other case stays: a handler that returns after its
	// entry could have lapsed (another request may have taken the key)
	// gets UNAVAILABLE, never a second answer.
	store.down.Store(false)
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		store.down.Store(true)
		<-ctx.Done()
		time.Sleep(lease / 2) // past the entry's 3/2 Lease
		return &inventoryv1.ReserveStockResponse{ReservationId: "late"}, nil
	}
	if _, err := reserve(t, client, "o-late"); status.Code(err) != codes.Unavailable {
		t.Fatalf("handler returning after its entry could lapse: %v; want UNAVAILABLE", err)
	}
}
