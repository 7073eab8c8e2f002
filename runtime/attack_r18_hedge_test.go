package runtime_test

// Attacks on hedging with the caller's own call options: grpc.Header,
// grpc.Trailer and grpc.Peer write where the caller points them when an
// attempt ends. A hedged call makes several attempts at once; the caller
// made one call and must read the metadata of the copy whose answer it
// got, never another's, and never a write that lands after the call
// returned (a loser, cancelled, ends after the winner).

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18Copies serves GetStock's hedged copies: the first sends its header
// at once and hangs until cancelled; the second answers, with its own
// header and trailer. Each names itself in x-copy.
func r18Copies(ctx context.Context, c server.Call) error {
	n := "1"
	if c.N%2 == 0 {
		n = "2"
	}
	if err := grpc.SendHeader(ctx, metadata.Pairs("x-copy", n)); err != nil {
		return err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs("x-copy", n)); err != nil {
		return err
	}
	if n == "2" {
		return nil
	}
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

func TestAttackR18HedgedCallGivesTheCallerTheWinnersHeaderAndTrailer(t *testing.T) {
	atkNoLeak(t)
	var ended atomic.Int32 // attempts whose invoker returned
	counting := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		defer ended.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	fs, cc := startFault(t, r18Copies, counting)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})

	for round := range 3 {
		want := 2 * (round + 1) // attempts ended once this round's loser is done
		var hdr, trl metadata.MD
		var p peer.Peer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, grpc.Header(&hdr), grpc.Trailer(&trl), grpc.Peer(&p))
		cancel()
		if err != nil {
			t.Fatalf("round %d: the hedged call: %v", round, err)
		}
		// The loser is cancelled when the call returns; wait until it is
		// over on the client too (the interceptor's count orders its writes
		// before the reads below).
		atkWaitFor(t, "the losing copy ends", func() bool { return int(ended.Load()) == want })
		if got := hdr.Get("x-copy"); len(got) != 1 || got[0] != "2" {
			t.Errorf("round %d: the caller's header says x-copy %q, want [2], the copy that answered", round, got)
		}
		if got := trl.Get("x-copy"); len(got) != 1 || got[0] != "2" {
			t.Errorf("round %d: the caller's trailer says x-copy %q, want [2], the copy that answered", round, got)
		}
		if p.Addr == nil || p.Addr.String() != fs.Addr() {
			t.Errorf("round %d: the caller's peer is %v, want the server at %s", round, p.Addr, fs.Addr())
		}
	}
	if n := fs.Calls(atkGetStock); n != 6 {
		t.Errorf("the server saw %d calls, want 6: two copies for each of 3 calls", n)
	}
	atkWaitFor(t, "the server sees each call's loser cancelled", func() bool { return fs.Cancelled(atkGetStock) == 3 })
}

// The same, where the caller's options reach a call that is not hedged,
// and one that retries: each attempt runs to its end before the next, so
// the caller reads the last attempt's metadata, the one it got its answer
// or error with.
func TestAttackR18RetriedCallGivesTheCallerTheLastAttemptsTrailer(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		n := "1"
		if c.N%2 == 0 {
			n = "2"
		}
		if err := grpc.SetTrailer(ctx, metadata.Pairs("x-attempt", n)); err != nil {
			return err
		}
		if n == "1" {
			return status.Error(codes.Unavailable, "injected: the first attempt fails")
		}
		return nil
	})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	var trl metadata.MD
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}, grpc.Trailer(&trl)); err != nil {
		t.Fatalf("the retried call: %v", err)
	}
	if got := trl.Get("x-attempt"); len(got) != 1 || got[0] != "2" {
		t.Errorf("the caller's trailer says x-attempt %q, want [2], the attempt that answered", got)
	}
	if got := trl.Get(runtime.PushbackHeader); len(got) != 0 {
		t.Errorf("the caller's trailer holds %s %q, which the server never sent", runtime.PushbackHeader, got)
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2", n)
	}
}
