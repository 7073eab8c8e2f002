package runtime_test

// Attack on the README's Streams "Its outcome … classified as a unary
// attempt is" against the server's Guard: a WatchStock stream whose caller
// leaves less than the method's MinDeadline is refused by the Guard with
// DEADLINE_EXCEEDED marked DEADLINE_TOO_SHORT, which the breaker counts as
// nothing for a unary call ("the caller's time was short"). Streams must
// be judged alike: a handful of such refusals must not open the breaker
// the service's unary calls share, and each stream gives its permit back
// and counts once.

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

func TestAttack24eStreamsTheGuardFindsTooShortLeaveTheBreakerClosed(t *testing.T) {
	atkNoLeak(t)
	g, err := server.NewGuard(rserver.WithPolicy("example.inventory.v1.InventoryService", func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == atkWatchStock {
				p.Methods[i].MinDeadline = 3 * time.Second
				p.Methods[i].DefaultTimeout = 5 * time.Second
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start("127.0.0.1:0", server.Healthy, append(runtime.ServerOptions(), g.ServerOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc := dialFault(t, srv.Addr())
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 2
		m := atkMethod(p, atkWatchStock)
		m.Timeout, m.OverallTimeout = 10*time.Second, 0
	})
	rt := c.Runtime()
	const n = 5
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || ctxErrIs(err) {
			t.Fatalf("stream %d: %v, want the Guard's DEADLINE_EXCEEDED", i+1, err)
		}
		if k := atkInUse(t, rt, atkWatchStock); k != 0 {
			t.Fatalf("stream %d: %d permits after its end", i+1, k)
		}
	}
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateClosed, "breaker %v after streams the Guard found too short, want closed (as for unary calls)")
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "GetStock's breaker %v, want closed")
	if got := atk24eAttempts(t, reg, atkWatchStock); got["DEADLINE_EXCEEDED"] != n || len(got) != 1 {
		t.Errorf("attempts_total %v, want %d under DEADLINE_EXCEEDED", got, n)
	}
	// With time enough the stream goes through.
	st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = st.Recv()
	}
	if err != io.EOF {
		t.Fatalf("a stream with time enough: %v", err)
	}
}

// ctxErrIs reports whether err is the caller's own context error (grpc's
// "context deadline exceeded"), not the server's answer.
func ctxErrIs(err error) bool {
	return status.Convert(err).Message() == "context deadline exceeded"
}
