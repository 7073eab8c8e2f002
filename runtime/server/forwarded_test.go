package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// detailsBin is a grpc-status-details-bin value: the status st, serialized.
func detailsBin(t *testing.T, st *status.Status) string {
	t.Helper()
	b, err := proto.Marshal(st.Proto())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForwardedDetailsLoseOnlyTheMarks: withoutForwardedMarks takes the
// Guard's SHED and DEADLINE_TOO_SHORT marks out of each
// grpc-status-details-bin value, keeping the code, the message, the other
// details (the RetryInfo, another domain's SHED) and the other keys,
// whatever the key's case; a
// value that does not decode as a status, or that carries no mark, is
// kept byte for byte; the metadata given is never changed, and one
// without a mark is returned as it is, with no allocation.
func TestForwardedDetailsLoseOnlyTheMarks(t *testing.T) {
	retry, _ := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(5 * time.Millisecond)})
	shed, _ := anypb.New(&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain})
	short, _ := anypb.New(&errdetails.ErrorInfo{Reason: runtime.DeadlineReason, Domain: runtime.DoNotRetryDomain})
	other, _ := anypb.New(&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: "example.com"})
	marked := status.FromProto(&spb.Status{Code: int32(codes.Unavailable), Message: "C sheds", Details: []*anypb.Any{retry, shed, other, short}})
	plain := status.FromProto(&spb.Status{Code: int32(codes.Unavailable), Message: "C fails", Details: []*anypb.Any{retry, other}})
	md := metadata.Pairs(statusDetailsKey, detailsBin(t, marked), statusDetailsKey, "not a status", statusDetailsKey, detailsBin(t, plain), "x-trace", "t-1")
	before := md.Copy()

	got := withoutForwardedMarks(md)
	if !equalMD(md, before) {
		t.Errorf("the metadata given changed: %v, want %v", md, before)
	}
	vs := got.Get(statusDetailsKey)
	if len(vs) != 3 || vs[1] != "not a status" || vs[2] != detailsBin(t, plain) || got.Get("x-trace")[0] != "t-1" {
		t.Fatalf("%v: want the marked status stripped, the others and x-trace kept as they were", got)
	}
	sp := new(spb.Status)
	if err := proto.Unmarshal([]byte(vs[0]), sp); err != nil {
		t.Fatal(err)
	}
	st := status.FromProto(sp)
	if st.Code() != codes.Unavailable || st.Message() != "C sheds" || len(st.Details()) != 2 {
		t.Fatalf("stripped status %v %q %v, want UNAVAILABLE, C's message, the RetryInfo and example.com's SHED", st.Code(), st.Message(), st.Details())
	}
	if _, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || st.Details()[1].(*errdetails.ErrorInfo).GetDomain() != "example.com" {
		t.Errorf("kept details %v, want the RetryInfo and example.com's SHED, in order", st.Details())
	}

	// A key spelt in capitals, which gRPC sends lower-cased.
	upper := withoutForwardedMarks(metadata.MD{"Grpc-Status-Details-Bin": {detailsBin(t, marked)}})
	if err := proto.Unmarshal([]byte(upper["Grpc-Status-Details-Bin"][0]), sp); err != nil || len(sp.Details) != 2 {
		t.Errorf("a key in capitals: %v details (%v), want the two that are not marks", len(sp.Details), err)
	}

	unmarked := metadata.Pairs(statusDetailsKey, detailsBin(t, plain), "x-trace", "t-1")
	if n := testing.AllocsPerRun(100, func() { _ = withoutForwardedMarks(unmarked) }); n != 0 {
		t.Errorf("metadata without a mark: %v allocations, want 0", n)
	}
	noDetails := metadata.Pairs("x-trace", "t-1")
	if n := testing.AllocsPerRun(100, func() { _ = withoutForwardedMarks(noDetails) }); n != 0 {
		t.Errorf("metadata without status details: %v allocations, want 0", n)
	}
}

// TestForwardedTrailerOfAStreamLosesTheMark: B's WatchStock is a gateway
// that forwards C's trailer on its own stream, set on the stream
// (ServerStream.SetTrailer) or through its context (grpc.SetTrailer), and
// ends with an UNAVAILABLE of its own without details: B's caller gets
// B's failure without C's SHED mark, for a method in B's policies, as
// for its unary methods.
func TestForwardedTrailerOfAStreamLosesTheMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(grpc.ServerStream, metadata.MD)
	}{
		{"ServerStream.SetTrailer", func(ss grpc.ServerStream, md metadata.MD) { ss.SetTrailer(md) }},
		{"grpc.SetTrailer", func(ss grpc.ServerStream, md metadata.MD) { _ = grpc.SetTrailer(ss.Context(), md) }},
	} {
		t.Run(tc.name, func(t *testing.T) { wantForwardedTrailerUnmarked(t, tc.set) })
	}
}

// forwardingWatcher is B: its WatchStock calls C's GetStock and forwards
// C's trailer with set.
type forwardingWatcher struct {
	inventoryv1.UnimplementedInventoryServiceServer
	toC       inventoryv1.InventoryServiceClient
	set       func(grpc.ServerStream, metadata.MD)
	forwarded atomic.Int64
}

func (w *forwardingWatcher) WatchStock(req *inventoryv1.WatchStockRequest, ss grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]) error {
	var md metadata.MD
	_, err := w.toC.GetStock(lowCtx(ss.Context()), &inventoryv1.GetStockRequest{Sku: req.GetSku()}, grpc.Trailer(&md))
	w.forwarded.Store(int64(len(md.Get(statusDetailsKey))))
	w.set(ss, md)
	if err != nil {
		return status.Error(codes.Unavailable, "B: the stock lookup failed")
	}
	return nil
}

// fakeTransportStream is a grpc.ServerTransportStream for the Guard's
// interceptor called without a server: it accepts every header and
// trailer.
type fakeTransportStream struct{}

func (fakeTransportStream) Method() string                  { return getStock }
func (fakeTransportStream) SetHeader(metadata.MD) error     { return nil }
func (fakeTransportStream) SendHeader(metadata.MD) error    { return nil }
func (fakeTransportStream) SetTrailer(md metadata.MD) error { return nil }

// TestServedContextCostsNoAllocation: the handler's context, which holds
// the request's record of its dependencies and wraps gRPC's stream (so
// that a forwarded grpc-status-details-bin loses the Guard's marks), costs
// no allocation beyond the grant's: two for a request of a method without
// shedding, with or without a stream in its context, one fewer than the
// record and its context value cost apart; and a handler that sets a
// trailer without status details through it costs none of the Guard's.
func TestServedContextCostsNoAllocation(t *testing.T) {
	p := inventoryPolicy()
	p.Shedding = nil
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	base, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	info := &grpc.UnaryServerInfo{FullMethod: getStock}
	trailer := metadata.Pairs("x-trace", "t-1")
	var wrapped bool
	handler := func(ctx context.Context, req any) (any, error) {
		if s := grpc.ServerTransportStreamFromContext(ctx); s != nil {
			_, wrapped = s.(*markless)
			_ = grpc.SetTrailer(ctx, trailer)
		}
		return req, nil
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no stream", base},
		{"a stream", grpc.NewContextWithServerTransportStream(base, fakeTransportStream{})},
	} {
		n := testing.AllocsPerRun(200, func() {
			if _, err := g.UnaryInterceptor(tc.ctx, nil, info, handler); err != nil {
				t.Fatal(err)
			}
		})
		if n != 2 {
			t.Errorf("%s: %v allocations a request, want 2 (the grant and the handler's context)", tc.name, n)
		}
	}
	if !wrapped {
		t.Error("the handler's stream is not the Guard's markless: the test measured nothing")
	}
}

// TestForwardedTrailerOfADeduplicatedRequestLosesTheMark: B's
// ReserveStock, deduplicated (its stream wrapped twice: to record what
// the handler sets, and to take the marks out), forwards C's trailer and
// answers UNAVAILABLE of its own, without details (C's code: gRPC's
// client answers INTERNAL for a forwarded status whose code is not the
// one sent). Twice with one key, as a transient failure is not kept: each
// answer is B's UNAVAILABLE without C's SHED mark, the RetryInfo it
// forwarded kept, the handler run each time.
func TestForwardedTrailerOfADeduplicatedRequestLosesTheMark(t *testing.T) {
	toC, _ := shedAllLow(t)
	var forwarded atomic.Int64
	b := &inventoryServer{onReserve: func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		var md metadata.MD
		_, err := toC.GetStock(lowCtx(ctx), &inventoryv1.GetStockRequest{Sku: req.GetSku()}, grpc.Trailer(&md))
		forwarded.Store(int64(len(md.Get(statusDetailsKey))))
		_ = grpc.SetTrailer(ctx, md)
		if err != nil {
			return nil, status.Error(codes.Unavailable, "B: no stock to reserve")
		}
		return &inventoryv1.ReserveStockResponse{}, nil
	}}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil
	_, toB, _ := guarded(t, b, []*policy.Server{bPolicy})
	for i := range 2 {
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 5*time.Second), runtime.IdempotencyKeyHeader, "fw-1")
		_, got := toB.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "fw-1", Sku: "a", Units: 1})
		if shed, retryInfo := shedMarks(got); status.Code(got) != codes.Unavailable || shed || !retryInfo {
			t.Errorf("answer %d: %v (shed mark %v, RetryInfo %v); want B's UNAVAILABLE with the RetryInfo it forwarded, without C's mark", i, got, shed, retryInfo)
		}
	}
	if forwarded.Load() == 0 {
		t.Error("B forwarded no grpc-status-details-bin: C's refusal was not marked, the test proves nothing")
	}
	if n := b.reserveCalls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want twice (a transient failure is not kept)", n)
	}
}

// TestSendCompressorNeedsGRPCsOwnStream: the README's consequence of the
// wrapped stream, as stated: grpc.SetSendCompressor and
// grpc.ClientSupportedCompressors, which need gRPC's own stream in the
// context, return an error in a handler of a method in the Guard's
// policies, and work in one of a method outside them, whose stream the
// Guard leaves as it is. The request itself is served either way.
func TestSendCompressorNeedsGRPCsOwnStream(t *testing.T) {
	var inPolicy, outside atomic.Value
	srv := &inventoryServer{
		onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
			_, err := grpc.ClientSupportedCompressors(ctx)
			inPolicy.Store([]error{grpc.SetSendCompressor(ctx, "identity"), err})
			return &inventoryv1.GetStockResponse{}, nil
		},
		onReserve: func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
			_, err := grpc.ClientSupportedCompressors(ctx)
			outside.Store([]error{grpc.SetSendCompressor(ctx, "identity"), err})
			return &inventoryv1.ReserveStockResponse{}, nil
		},
	}
	p := inventoryPolicy()
	p.Methods = p.Methods[:1] // GetStock alone: ReserveStock is outside the policies
	_, client, _ := guarded(t, srv, []*policy.Server{p})
	if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ReserveStock(ctxTimeout(t, 5*time.Second), &inventoryv1.ReserveStockRequest{OrderId: "o"}); err != nil {
		t.Fatal(err)
	}
	if errs := inPolicy.Load().([]error); errs[0] == nil || errs[1] == nil {
		t.Errorf("in the policies: SetSendCompressor %v, ClientSupportedCompressors %v; want both to fail, as the README says", errs[0], errs[1])
	}
	if errs := outside.Load().([]error); errs[0] != nil || errs[1] != nil {
		t.Errorf("outside the policies: SetSendCompressor %v, ClientSupportedCompressors %v; want both to work", errs[0], errs[1])
	}
}

// wantForwardedTrailerUnmarked: B, guarded without shedding, forwards to
// its caller the trailer of a WatchStock stream C shed, with set; B's
// caller must get B's UNAVAILABLE without C's shed mark, and B must have
// forwarded grpc-status-details-bin (else the check proves nothing).
func wantForwardedTrailerUnmarked(t *testing.T, set func(grpc.ServerStream, metadata.MD)) {
	t.Helper()
	toC, _ := shedAllLow(t)
	b := &forwardingWatcher{toC: toC, set: set}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil
	g, err := NewGuard([]*policy.Server{bPolicy}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	toB := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, b, g.ServerOptions()...)))
	stream, err := toB.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, got := stream.Recv()
	if shed, _ := shedMarks(got); status.Code(got) != codes.Unavailable || shed {
		t.Errorf("B's stream ended %v (shed mark %v); want B's UNAVAILABLE without C's mark", got, shed)
	}
	if b.forwarded.Load() == 0 {
		t.Error("B forwarded no grpc-status-details-bin: C's refusal was not marked, the test proves nothing")
	}
}
