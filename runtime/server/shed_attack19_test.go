package server

import (
	"context"
	"errors"
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

// shedAllLow starts C, an inventory service behind a Guard whose two low
// places are held by requests it keeps until the test ends, so that every
// further low request is shed (UNAVAILABLE, marked SHED, a 5 ms pushback).
// It returns a plain client of C and C's handler.
func shedAllLow(t *testing.T) (inventoryv1.InventoryServiceClient, *inventoryServer) {
	t.Helper()
	release := make(chan struct{})
	held := make(chan struct{}, 2)
	c := &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		if req.GetSku() == "hold" {
			held <- struct{}{}
			<-release
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}}
	gc, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)),
		WithPolicy(inventory, func(p *policy.Server) { p.Shedding.Pushback = 5 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	toC := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, c, gc.ServerOptions()...)))
	t.Cleanup(func() { close(release) })
	for range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = toC.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "hold"})
		}()
		<-held
	}
	return toC, c
}

func lowCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, runtime.PriorityHeader, "low")
}

// TestAttack19ExhaustedRetriesIntoASheddingServerAreStillMarked: B's
// handler calls C through the client runtime (3 attempts, no
// ClientInterceptor on B's connection), C sheds every attempt with its
// SHED mark, and the runtime reports runtime.ErrRetriesExhausted. The
// README (Server side, do-not-retry): the Guard marks a handler's error
// that is the runtime's report that every attempt was made and failed
// transiently ("ErrRetriesExhausted, which the Guard marks as well"), so
// B's caller is told not to retry B, which would only multiply the calls
// into C. The Guard takes the shed mark out of B's error before it decides
// to mark it, and taking it out rebuilt the error as a plain status: the
// errors.Is chain to ErrRetriesExhausted was lost and the mark never came.
// Counted: C's shed refusals per B request, and B's caller's view.
func TestAttack19ExhaustedRetriesIntoASheddingServerAreStillMarked(t *testing.T) {
	toC, c := shedAllLow(t)
	viaRuntime := newRuntimeClient(t, toC)
	handlerErrs := make(chan error, 1)
	b := &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		resp, err := viaRuntime.GetStock(lowCtx(ctx), req)
		handlerErrs <- err
		return resp, err
	}}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil // B sheds nothing itself
	gb, err := NewGuard([]*policy.Server{bPolicy}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	toB := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, b, gb.ServerOptions()...)))

	var trailer metadata.MD
	_, got := toB.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}, grpc.Trailer(&trailer))
	handlerErr := <-handlerErrs
	if !errors.Is(handlerErr, runtime.ErrRetriesExhausted) {
		t.Fatalf("B's handler got %v; want the runtime's ErrRetriesExhausted (C shed its 3 attempts)", handlerErr)
	}
	if n := c.getCalls.Load(); n != 2 {
		t.Errorf("C ran GetStock %d times; want 2 (the held ones), B's attempts all shed", n)
	}
	shed, _ := shedMarks(got)
	d, ok := runtime.Pushback(got, trailer)
	if status.Code(got) != codes.Unavailable || shed {
		t.Errorf("B's caller got %v (shed mark %v); want UNAVAILABLE without C's shed mark", got, shed)
	}
	if !IsDoNotRetry(got) || !ok || d >= 0 {
		t.Errorf("B's caller got %v, do-not-retry detail %v, trailer %v (pushback %v, %v): want the do-not-retry mark, as for ErrRetriesExhausted of unmarked failures",
			got, IsDoNotRetry(got), trailer.Get(PushbackHeader), d, ok)
	}
	if n := stats(t, gb).MarkedDoNotRetry; n != 1 {
		t.Errorf("B's Guard marked %d failures; want 1", n)
	}
}
