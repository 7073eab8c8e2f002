package server

import (
	"context"
	"errors"
	"strings"
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

// TestAttack19StreamPassingOnAShedRefusalKeepsTheRest: B's WatchStock
// handler sends one message, sets its own pushback trailer and ends with
// C's shed refusal (UNAVAILABLE, RetryInfo 5 ms, SHED). The README (Server
// side, priority shedding): the Guard takes the mark out of an error its
// handler returns, unary or stream, keeping the code, the message's
// words, the RetryInfo; the handler's trailer is its own and stays.
func TestAttack19StreamPassingOnAShedRefusalKeepsTheRest(t *testing.T) {
	toC, _ := shedAllLow(t)
	_, shedErr := toC.GetStock(lowCtx(context.Background()), &inventoryv1.GetStockRequest{Sku: "a"})
	if shed, ri := shedMarks(shedErr); !shed || !ri {
		t.Fatalf("C's refusal %v: want the shed mark and a RetryInfo", shedErr)
	}
	b := &inventoryServer{onWatch: func(ctx context.Context) error {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "40"))
		return shedErr
	}}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil
	_, toB, _ := guarded(t, b, []*policy.Server{bPolicy})
	st, err := toB.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = st.Recv()
	}
	got := status.Convert(err)
	shed, ri := shedMarks(err)
	if got.Code() != codes.Unavailable || shed || !ri || got.Message() != status.Convert(shedErr).Message() {
		t.Errorf("B's stream ended %v (shed mark %v, RetryInfo %v); want C's code and message, its RetryInfo, no shed mark", err, shed, ri)
	}
	if v := st.Trailer().Get(runtime.PushbackHeader); len(v) != 1 || v[0] != "40" {
		t.Errorf("B's trailer %v: want the handler's own pushback 40", v)
	}
	if d, ok := runtime.Pushback(err, st.Trailer()); !ok || d != 40*time.Millisecond {
		t.Errorf("pushback %v %v; want the trailer's 40ms", d, ok)
	}
	if IsDoNotRetry(err) {
		t.Errorf("B's stream end is marked do-not-retry; B called C with no ClientInterceptor and returned its plain refusal")
	}
}

// TestAttack19MethodOutsideThePoliciesPassesTheMarkOn: one gRPC server
// behind one Guard (gRPC takes one tap per server, so the Guard holds
// every service of the server), serving a service the Guard has no policy
// for: its handler passes on C's shed refusal. The README: "The mark is
// the shedding server's alone: a Guard takes it out of an error its
// handler returns". For a method outside the Guard's policies the
// interceptors pass the request straight to the handler, and the mark
// reaches the callers, whose breakers then count this server's failure
// as nothing: the server never shed it.
func TestAttack19MethodOutsideThePoliciesPassesTheMarkOn(t *testing.T) {
	toC, _ := shedAllLow(t)
	b := &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		return toC.GetStock(lowCtx(ctx), req)
	}}
	other := &policy.Server{Name: "example.other.v1.OtherService", Shedding: &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4}}}
	_, toB, _ := guarded(t, b, []*policy.Server{other})
	_, got := toB.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
	if shed, _ := shedMarks(got); status.Code(got) != codes.Unavailable || shed {
		t.Errorf("B's answer %v (shed mark %v); want UNAVAILABLE without C's shed mark", got, shed)
	}
}

// TestAttack19ForwardedTrailerCarriesTheMarkPastTheGuard: B's handler is
// a thin gateway that forwards its dependency's trailer (grpc.Trailer on
// the call to C, grpc.SetTrailer on its own answer), as proxies do, and
// answers C's refusal with a failure of its own words and code
// (UNAVAILABLE, no details). gRPC-Go gives the client C's
// grpc-status-details-bin as trailer metadata (it is not a reserved
// header), and a server whose status has no details sends the handler's
// copy of it as it is; B's caller then decodes C's status, which gRPC
// takes for the whole answer when its code is the grpc-status sent. The
// README: the mark is the shedding server's alone, a Guard takes it out
// of what its handler passes on, its trailer included: B's caller gets
// B's UNAVAILABLE with what B forwarded (C's message and pushback, gRPC's
// doing), without C's SHED mark.
func TestAttack19ForwardedTrailerCarriesTheMarkPastTheGuard(t *testing.T) {
	toC, _ := shedAllLow(t)
	b := &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		var md metadata.MD
		_, err := toC.GetStock(lowCtx(ctx), req, grpc.Trailer(&md))
		_ = grpc.SetTrailer(ctx, md)
		if err != nil {
			return nil, status.Error(codes.Unavailable, "B: the stock lookup failed")
		}
		return &inventoryv1.GetStockResponse{}, nil
	}}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil
	_, toB, _ := guarded(t, b, []*policy.Server{bPolicy})
	_, got := toB.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
	shed, retryInfo := shedMarks(got)
	if status.Code(got) != codes.Unavailable || shed {
		t.Errorf("B's answer %v (shed mark %v); want B's UNAVAILABLE without C's mark", got, shed)
	}
	if msg := status.Convert(got).Message(); !strings.Contains(msg, "shedding low-priority requests") || !retryInfo {
		t.Errorf("B's answer %q (RetryInfo %v); want the rest of what B forwarded kept: C's message and pushback", msg, retryInfo)
	}
}
