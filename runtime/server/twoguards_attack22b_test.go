package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack22bTwoGuardsOneStoreDeduplicateOnce: a library's Guard and
// the service's own, each built from the generated policy (ReserveStock
// deduplicated), chained on one server. Given one store, the outer
// claimed the key and ran the inner, which found the key pending (the
// outer's own claim) and waited for it: the request waited for itself
// until its deadline, and the handler never ran. The inner Guard passes a
// request on whose key an outer Guard holds for it: the handler runs
// once, and the repeat is replayed by the outer Guard.
func TestAttack22bTwoGuardsOneStoreDeduplicateOnce(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := "one store"
		if !shared {
			name = "a store each"
		}
		t.Run(name, func(t *testing.T) {
			store := NewMemoryStore(10)
			g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
			if err != nil {
				t.Fatal(err)
			}
			if !shared {
				store = NewMemoryStore(10)
			}
			g2, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
			if err != nil {
				t.Fatal(err)
			}
			srv := &inventoryServer{}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(g1.TapHandle),
				grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
			send := func() (*inventoryv1.ReserveStockResponse, error) {
				return client.ReserveStock(withKey(ctxTimeout(t, 500*time.Millisecond), "k-two"),
					&inventoryv1.ReserveStockRequest{OrderId: "k-two", Sku: "a", Units: 1})
			}
			start := time.Now()
			first, err := send()
			if err != nil {
				t.Fatalf("first request: %v after %s; want the handler's answer", err, time.Since(start).Round(time.Millisecond))
			}
			again, err := send()
			if err != nil || again.GetReservationId() != first.GetReservationId() {
				t.Fatalf("repeat: %v, %v; want the replay of %q", again, err, first.GetReservationId())
			}
			if n := srv.reserveCalls.Load(); n != 1 {
				t.Fatalf("the handler ran %d times, want 1", n)
			}
			if s1, s2 := stats(t, g1), stats(t, g2); s1.Replayed != 1 || s2.Replayed != 0 || s2.Waited != 0 {
				t.Errorf("replayed %d by the outer Guard, %d by the inner (which waited %d times); want 1, 0, 0", s1.Replayed, s2.Replayed, s2.Waited)
			}
			if shared && store.Len() != 1 {
				t.Errorf("%d entries in the store, want the one of the key", store.Len())
			}
		})
	}
}

// tokenlessStore is a Store of a program's own written before
// Claim.Token: it never tells a pending key's owner.
type tokenlessStore struct{ *MemoryStore }

func (s tokenlessStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	c, err := s.MemoryStore.Claim(ctx, key, token, fp, lease)
	c.Token = ""
	return c, err
}

// TestTwoGuardsOnAStoreThatTellsNoToken: the README's promise for a Store
// that leaves Claim.Token empty: correct, never a second run, but two
// Guards on it wait for the request's own claim until its deadline, as
// before owner tokens (DEADLINE_EXCEEDED, the handler never run).
func TestTwoGuardsOnAStoreThatTellsNoToken(t *testing.T) {
	store := tokenlessStore{NewMemoryStore(10)}
	var gs []*Guard
	for range 2 {
		g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	srv := &inventoryServer{}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(gs[0].TapHandle),
		grpc.ChainUnaryInterceptor(gs[0].UnaryInterceptor, gs[1].UnaryInterceptor))))
	_, err := client.ReserveStock(withKey(ctxTimeout(t, 400*time.Millisecond), "k-tokenless"),
		&inventoryv1.ReserveStockRequest{OrderId: "k-tokenless", Sku: "a", Units: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%v, want DEADLINE_EXCEEDED: the inner Guard waits for the outer's claim it cannot tell its own", err)
	}
	if n := srv.reserveCalls.Load(); n != 0 {
		t.Errorf("the handler ran %d times, want 0", n)
	}
	if w := stats(t, gs[1]).Waited; w == 0 {
		t.Error("the inner Guard never waited: it passed the request on without the owner's token")
	}
}
