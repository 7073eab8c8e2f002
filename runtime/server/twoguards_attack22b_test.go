package server

import (
	"testing"
	"time"

	"google.golang.org/grpc"

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
