package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// twoGuardsOn builds two Guards from pol (each its own memory store) and
// serves srv behind both: the first's tap and its interceptor outside the
// second's, as a library's Guard chained beside the service's own.
func twoGuardsOn(t *testing.T, srv *inventoryServer, outer, inner *policy.Server) (*Guard, *Guard, inventoryv1.InventoryServiceClient) {
	t.Helper()
	g1, err := NewGuard([]*policy.Server{outer}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{inner}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(g1.TapHandle),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
	return g1, g2, client
}

// TestAttack23sTwoGuardsDefaultTimeoutIsNotTheCallers: "a request that
// sent no deadline is refused only once its DefaultTimeout has passed"
// (a DefaultTimeout equal to MinDeadline is accepted). Two Guards built
// from one policy with MinDeadline = DefaultTimeout = 1 s: the inner Guard
// took the outer's DefaultTimeout for a deadline the caller left, and
// refused every request sent without a deadline, before its handler,
// DEADLINE_EXCEEDED "needs at least 1s, the caller left 999.9ms" marked
// DEADLINE_TOO_SHORT (the handler ran 0 times). Unary and deduplicated:
// each runs once, the repeat replayed.
func TestAttack23sTwoGuardsDefaultTimeoutIsNotTheCallers(t *testing.T) {
	pol := func() *policy.Server {
		p := inventoryPolicy()
		for i := range p.Methods[:2] { // GetStock, ReserveStock
			p.Methods[i].MinDeadline = time.Second
			p.Methods[i].DefaultTimeout = time.Second
		}
		return p
	}
	srv := &inventoryServer{}
	g1, g2, client := twoGuardsOn(t, srv, pol(), pol())
	for i := range 3 {
		if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
			t.Fatalf("GetStock %d without a deadline: %v; want the handler's answer", i, err)
		}
	}
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-23s", Sku: "a", Units: 1}
	first, err := client.ReserveStock(withKey(context.Background(), "k-23s"), req)
	if err != nil {
		t.Fatalf("ReserveStock without a deadline: %v; want the handler's answer", err)
	}
	again, err := client.ReserveStock(withKey(context.Background(), "k-23s"), req)
	if err != nil || again.GetReservationId() != first.GetReservationId() {
		t.Fatalf("its repeat: %v, %v; want the replay of %q", again, err, first.GetReservationId())
	}
	if g, r := srv.getCalls.Load(), srv.reserveCalls.Load(); g != 3 || r != 1 {
		t.Errorf("GetStock ran %d times, ReserveStock %d; want 3 and 1", g, r)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.DeadlineRefused+s2.DeadlineRefused != 0 || s1.Replayed != 1 {
		t.Errorf("deadline refusals %d (outer), %d (inner), replays by the outer %d; want 0, 0, 1", s1.DeadlineRefused, s2.DeadlineRefused, s1.Replayed)
	}
}

// TestAttack23sTwoGuardsShorterDefaultTimeoutBounds: each Guard bounds a
// request that came without a deadline by its DefaultTimeout, so the
// shorter of the two bounds the handler, whichever Guard is outside. The
// inner Guard took the outer's longer DefaultTimeout for the caller's
// deadline and left its own unapplied: its handler ran for 2 s instead of
// 300 ms.
func TestAttack23sTwoGuardsShorterDefaultTimeoutBounds(t *testing.T) {
	const short, long = 300 * time.Millisecond, 2 * time.Second
	pol := func(d time.Duration) *policy.Server {
		p := inventoryPolicy()
		p.Methods[0].MinDeadline, p.Methods[0].DefaultTimeout = 0, d
		return p
	}
	for _, order := range [][2]time.Duration{{long, short}, {short, long}} {
		t.Run(fmt.Sprintf("outer %s, inner %s", order[0], order[1]), func(t *testing.T) {
			srv := &inventoryServer{}
			left := make(chan time.Duration, 1)
			srv.onGet = tellsTimeLeft(left)
			_, _, client := twoGuardsOn(t, srv, pol(order[0]), pol(order[1]))
			if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
				t.Fatalf("GetStock without a deadline: %v", err)
			}
			if l := <-left; l <= 0 || l > short {
				t.Errorf("the handler had %s left; want at most the shorter DefaultTimeout, %s", l, short)
			}
		})
	}
}
