package example_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestHedgeAdmittedFailureBeforeTheTooShortRefusalIsTheAnswer: the order
// TestAttack19cHedgeTooShortThenAdmittedCopyFails met once on a loaded
// machine. The admitted copy fails (UNAVAILABLE, non-fatal) first, and the
// second copy's refusal for a deadline too short (marked
// DEADLINE_TOO_SHORT) comes back after it, with no copy left in flight.
// The refusal says something of that copy alone: the call's answer is the
// admitted copy's UNAVAILABLE, not the refusal's DEADLINE_EXCEEDED (which
// it was: the refusal was taken for a failure every copy would meet).
//
// The second copy is held by a client interceptor until 700 ms into the
// call, so it reaches the Guard with at most 500 of the caller's 1200 ms,
// under the 600 ms MinDeadline, and 500 ms after the first copy's failure
// at 200 ms; the first copy may take 600 ms to arrive and still be
// admitted, and the refusal has 500 ms to come back before the caller's
// deadline. (With 900, 500 and 500 ms, at load 12 the caller's deadline
// passed before the held copy reached the Guard.)
func TestHedgeAdmittedFailureBeforeTheTooShortRefusalIsTheAnswer(t *testing.T) {
	const deadline, minDeadline, release = 1200 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond
	g, err := server.NewGuard(rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == getStock {
				p.Methods[i].MinDeadline = minDeadline
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
		if c.Method != getStock {
			return nil
		}
		ran.Add(1)
		if err := server.Wait(ctx, 200*time.Millisecond); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "down")
	}, g.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	var begin atomic.Int64 // the call's start, in UnixNano
	var copies atomic.Int64
	holdSecond := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == getStock && copies.Add(1)%2 == 0 {
			until := time.Unix(0, begin.Load()).Add(release)
			select {
			case <-time.After(time.Until(until)):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(holdSecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithPolicy(func(p *policy.Service) {
			p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
			p.Methods[0].Timeout = 2 * time.Second
			p.Methods[0].Hedging = &policy.Hedging{Delay: 100 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The connection is ready before the timed part (a warm-up call,
	// under its 300 ms timeout, could itself fail on a loaded machine).
	readyConn(t, cc)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		begin.Store(time.Now().UnixNano())
		_, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "s"})
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("call %d: %v, want the admitted copy's UNAVAILABLE", i, err)
		}
	}
	s, _ := g.Stats(inventoryName)
	if ran.Load() != 2 || s.DeadlineRefused != 2 {
		t.Errorf("handler ran %d, Guard refused %d as too short; want 2 and 2 (one admitted and one refused copy per call)", ran.Load(), s.DeadlineRefused)
	}
}
