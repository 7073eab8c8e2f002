package example_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestAttack19bHedgeCopyTooShortEndsTheCall: GetStock hedged (a second
// copy after hedgeDelay, 550 ms, UNAVAILABLE non-fatal) against a healthy
// server that answers in answerAfter (850 ms), whose Guard needs minLeft
// (700 ms) left (MinDeadline). A caller with callerTime (1.2 s): the
// first copy is admitted and would answer at 850 ms; the second, sent at
// 550 ms with 650 ms left, is refused at the door with
// DEADLINE_EXCEEDED marked DEADLINE_TOO_SHORT and do-not-retry. That
// refusal speaks of the copy's time, not of the call: the README has the
// mark say "the caller's time was short and the service says nothing of
// its health by it", and a hedge's copies are the client's own extra
// load. The first copy, admitted with time enough, is still in flight.
// The hedging loop took the refusal (a code outside NonFatalCodes)
// for the call's answer and cancelled the first copy: the caller got
// DEADLINE_EXCEEDED from a healthy server that was about to answer.
//
// Fixed in runtime/hedge.go (the loop's case for a fatal answer): a copy
// refused with the Guard's DEADLINE_TOO_SHORT (or SHED) mark while others
// are in flight stops further copies and lets those in flight answer, as
// it does for a pushback refusal.
//
// The times are tooShortRig's (hedge_attack19c_test.go): the first copy
// has 500 ms to arrive and be admitted. With a caller of 280 ms against
// 200 ms it had 80 ms, and at load 8 it arrived too late; with 300 ms, at
// load 10 it did too (in the 19c test). The other methods have 5 s
// (longTimeouts), and the connection is made before the warm-up call.
func TestAttack19bHedgeCopyTooShortEndsTheCall(t *testing.T) {
	minDeadline := rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == getStock {
				p.Methods[i].MinDeadline = minLeft
			}
		}
	})
	hedged := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
		p.Methods[0].Timeout = 2 * callerTime
		p.Methods[0].Hedging = &policy.Hedging{Delay: hedgeDelay, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	g, err := server.NewGuard(minDeadline)
	if err != nil {
		t.Fatal(err)
	}
	slow := func(ctx context.Context, c server.Call) error {
		if c.Method == getStock {
			return server.Wait(ctx, answerAfter)
		}
		return nil
	}
	srv, err := server.Start("127.0.0.1:0", slow, g.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc, client := dialInventory(t, srv.Addr(), nil, longTimeouts, hedged)
	readyConn(t, cc)
	if _, err := client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "warm"}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	const calls = 3
	for range calls {
		ctx, cancel := context.WithTimeout(context.Background(), callerTime)
		start := time.Now()
		resp, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "s"})
		took := time.Since(start)
		cancel()
		if err != nil || resp.GetUnits() != 42 {
			failed++
			t.Logf("GetStock after %v: %v", took.Round(time.Millisecond), err)
		}
	}
	s, _ := g.Stats(inventoryName)
	if failed > 0 {
		t.Errorf("%d of %d hedged GetStock failed (the Guard refused %d late copies as too short); want the first copy's answer, at %v", failed, calls, s.DeadlineRefused, answerAfter)
	}
}
