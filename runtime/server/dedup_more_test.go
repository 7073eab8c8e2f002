package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

func reserveBody(t *testing.T, client inventoryv1.InventoryServiceClient, ctx context.Context, key string, units int64, opts ...grpc.CallOption) (*inventoryv1.ReserveStockResponse, error) {
	t.Helper()
	return client.ReserveStock(withKey(ctx, key), &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: units}, opts...)
}

// TestDedupKeyBelongsToOneRequest: a second request with the same key and
// another body is refused with INVALID_ARGUMENT, whether the first is done
// or still running, and the handler does not run for it; the same body is
// replayed.
func TestDedupKeyBelongsToOneRequest(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if req.GetSku() == "slow" {
			<-release
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + itoa(req.GetUnits())}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	first, err := reserveBody(t, client, ctxTimeout(t, time.Second), "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reserveBody(t, client, ctxTimeout(t, time.Second), "k", 2)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "different request") {
		t.Errorf("same key, other body: %v, want INVALID_ARGUMENT saying the key was used by a different request", err)
	}
	again, err := reserveBody(t, client, ctxTimeout(t, time.Second), "k", 1)
	if err != nil || !proto.Equal(again, first) {
		t.Errorf("same key, same body: %v %v, want the first answer", again, err)
	}
	// While the first runs: refused at once, not made to wait.
	done := make(chan error, 1)
	go func() {
		_, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "slow-key"), &inventoryv1.ReserveStockRequest{Sku: "slow", Units: 1})
		done <- err
	}()
	eventually(t, "slow running", func() bool { return srv.reserveCalls.Load() == 2 })
	start := time.Now()
	_, err = client.ReserveStock(withKey(ctxTimeout(t, time.Second), "slow-key"), &inventoryv1.ReserveStockRequest{Sku: "slow", Units: 9})
	if status.Code(err) != codes.InvalidArgument || time.Since(start) > 200*time.Millisecond {
		t.Errorf("other body while the first runs: %v after %s, want INVALID_ARGUMENT at once", err, time.Since(start))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
	if s := stats(t, g); s.Mismatched != 2 {
		t.Errorf("mismatched %d, want 2", s.Mismatched)
	}
}

// tenantScope scopes keys by the "tenant" metadata (in a real service, a
// value the service has verified).
func tenantScope(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("tenant"); len(v) == 1 && v[0] != "" {
		return v[0], nil
	}
	return "", errors.New("no tenant")
}

// TestDedupKeysScopedByCaller: with WithKeyScope, two tenants sending the
// same key and body run twice and get their own answers; a tenant's repeat
// is replayed; a request whose scope cannot be told is refused. Without
// it, the default single scope makes them collide.
func TestDedupKeysScopedByCaller(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		srv := &inventoryServer{}
		var opts []Option
		if scoped {
			opts = append(opts, WithKeyScope(tenantScope))
		}
		_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, opts...)
		as := func(tenant string) context.Context {
			return metadata.AppendToOutgoingContext(ctxTimeout(t, time.Second), "tenant", tenant)
		}
		a, errA := reserveBody(t, client, as("acme"), "order-1", 1)
		b, errB := reserveBody(t, client, as("globex"), "order-1", 1)
		a2, errA2 := reserveBody(t, client, as("acme"), "order-1", 1)
		if errA != nil || errB != nil || errA2 != nil {
			t.Fatal(errA, errB, errA2)
		}
		if !proto.Equal(a, a2) {
			t.Errorf("scoped %v: a tenant's repeat got %v, want %v", scoped, a2, a)
		}
		wantRuns := int64(1)
		if scoped {
			wantRuns = 2
			if proto.Equal(a, b) {
				t.Errorf("two tenants got the same answer %v", a)
			}
			_, err := reserveBody(t, client, ctxTimeout(t, time.Second), "order-1", 1)
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("request without a scope: %v, want UNAUTHENTICATED", err)
			}
		}
		if n := srv.reserveCalls.Load(); n != wantRuns {
			t.Errorf("scoped %v: handler ran %d times, want %d", scoped, n, wantRuns)
		}
	}
}

// TestDedupReplaysHeadersAndTrailers: the headers and trailers the handler
// set, and a final status with its details, are replayed exactly.
func TestDedupReplaysHeadersAndTrailers(t *testing.T) {
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-shard", "7", "x-shard", "8"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-ledger-entry", "e-1", "x-bin-bin", "\x00\x01"))
		if req.GetUnits() > 10 {
			st, _ := status.New(codes.FailedPrecondition, "no stock").WithDetails(
				&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{Type: "STOCK", Subject: "a"}}})
			return nil, st.Err()
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + itoa(req.GetUnits())}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for _, units := range []int64{1, 11} {
		type answer struct {
			resp            *inventoryv1.ReserveStockResponse
			err             error
			header, trailer metadata.MD
		}
		call := func() answer {
			var a answer
			a.resp, a.err = reserveBody(t, client, ctxTimeout(t, time.Second), "k-"+itoa(units), units, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
			return a
		}
		first, again := call(), call()
		if !proto.Equal(first.resp, again.resp) || !proto.Equal(status.Convert(first.err).Proto(), status.Convert(again.err).Proto()) {
			t.Errorf("units %d: replay %v %v, want %v %v", units, again.resp, again.err, first.resp, first.err)
		}
		for _, k := range []string{"x-shard"} {
			if strings.Join(again.header.Get(k), ",") != "7,8" {
				t.Errorf("units %d: replayed header %s = %v, want [7 8]", units, k, again.header.Get(k))
			}
		}
		for _, k := range []string{"x-ledger-entry", "x-bin-bin"} {
			if strings.Join(again.trailer.Get(k), ",") != strings.Join(first.trailer.Get(k), ",") || len(first.trailer.Get(k)) != 1 {
				t.Errorf("units %d: trailer %s: first %v, replay %v", units, k, first.trailer.Get(k), again.trailer.Get(k))
			}
		}
		if again.trailer.Get(ReplayedHeader) == nil || first.trailer.Get(ReplayedHeader) != nil {
			t.Errorf("units %d: %s on the replay %v, on the first %v", units, ReplayedHeader, again.trailer.Get(ReplayedHeader), first.trailer.Get(ReplayedHeader))
		}
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
	if s := stats(t, g); s.Replayed != 2 {
		t.Errorf("replayed %d, want 2", s.Replayed)
	}
}

// TestDedupTakeOverRechecksDeadline: a repeat that arrived with 170 ms left
// waits for the first request, which fails transiently after 130 ms, and
// takes the key over with less than the method's 100 ms MinDeadline left:
// it is refused with DEADLINE_EXCEEDED instead of running (no handler runs
// with less than the MinDeadline left), and frees the key.
func TestDedupTakeOverRechecksDeadline(t *testing.T) {
	srv := &inventoryServer{}
	var n, short atomic.Int64
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 100*time.Millisecond {
			short.Add(1)
		}
		if n.Add(1) == 1 {
			time.Sleep(130 * time.Millisecond)
			return nil, status.Error(codes.Unavailable, "database down")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	p := inventoryPolicy()
	p.Methods[1].MinDeadline = 100 * time.Millisecond
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "o-1")
		first <- err
	}()
	eventually(t, "first running", func() bool { return srv.reserveCalls.Load() == 1 })
	_, err := client.ReserveStock(withKey(ctxTimeout(t, 170*time.Millisecond), "o-1"), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("waiter taking over with too little time: %v, want DEADLINE_EXCEEDED", err)
	}
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Errorf("first: %v, want its UNAVAILABLE", err)
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times, want 1: the waiter ran short of its MinDeadline", c)
	}
	// The waiter's own client may give up (its 170 ms) while the server
	// still holds the key it took over, about to refuse and free it: the
	// later repeat comes once the server is done with the waiter, or it
	// waits for that key too (found by CI on a loaded machine).
	eventually(t, "the waiter done on the server", func() bool { return stats(t, g).InFlight == 0 })
	if _, err := reserve(t, client, "o-1"); err != nil {
		t.Errorf("a later repeat: %v, want it to run (the key freed)", err)
	}
	if short.Load() != 0 {
		t.Errorf("a handler ran with less than the MinDeadline left")
	}
	if s := stats(t, g); s.Waited != 1 {
		t.Errorf("stats %+v, want one waiter", s)
	}
}
