package server

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18HugeLeaseDoesNotWrap: a lease no one means (an override
// file may write lease: 2562047h, the longest duration), whose 3/2 (the
// pending entry's life) and 5/4 (when the request gives its key up) wrap
// to negative durations in int64 nanoseconds: the entry would be born
// expired (a repeat runs alongside the first) and the lease lost at once.
// NewGuard refuses such a lease (at most policy.MaxLease); the longest it
// accepts runs the handler once, and a repeat meanwhile waits and gets its
// answer.
func TestAttackR18HugeLeaseDoesNotWrap(t *testing.T) {
	for _, lease := range []time.Duration{math.MaxInt64, 2562047 * time.Hour, 7e18} {
		p := &policy.Server{Name: inventory, Methods: []policy.ServerMethod{{Name: reserveStock,
			Dedup:       &policy.Dedup{TTL: time.Minute, Lease: lease},
			NewResponse: func() proto.Message { return new(inventoryv1.ReserveStockResponse) }}}}
		if _, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1))); err == nil {
			t.Errorf("NewGuard accepted a %v lease, want it refused above %v", lease, policy.MaxLease)
		}
	}
	for _, lease := range []time.Duration{policy.MaxLease} {
		t.Run(lease.String(), func(t *testing.T) {
			p := &policy.Server{Name: inventory, Methods: []policy.ServerMethod{{Name: reserveStock,
				Dedup:       &policy.Dedup{TTL: time.Minute, Lease: lease},
				NewResponse: func() proto.Message { return new(inventoryv1.ReserveStockResponse) }}}}
			srv := &inventoryServer{}
			started, release := make(chan struct{}, 2), make(chan struct{})
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-1"}, nil
			}
			g, client, _ := guarded(t, srv, []*policy.Server{p})
			first := make(chan error, 1)
			go func() {
				_, err := reserve(t, client, "h-1")
				first <- err
			}()
			<-started
			repeat := make(chan string, 1)
			go func() {
				resp, err := reserve(t, client, "h-1")
				if err != nil {
					t.Errorf("the repeat: %v, want the first's answer", err)
				}
				repeat <- resp.GetReservationId()
			}()
			eventually(t, "the repeat waiting, or running", func() bool { return stats(t, g).Waited == 1 || len(started) == 1 })
			close(release)
			if err := <-first; err != nil {
				t.Errorf("the first, under a %s lease: %v, want its answer", lease, err)
			}
			if got := <-repeat; got != "r-1" || srv.reserveCalls.Load() != 1 {
				t.Errorf("the repeat got %q after %d runs, want r-1 after 1", got, srv.reserveCalls.Load())
			}
			if s := stats(t, g); s.LeasesLost != 0 {
				t.Errorf("stats %+v: want no lease lost", s)
			}
		})
	}
}
