package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestFailedRequestCostsNoAllocationMore: a handler's plain status error
// (one that wraps nothing) costs the Guard no allocation on its way to the
// caller: notRefusedHere allocates nothing for it, and a failed request
// of a method without shedding costs the two allocations of a served
// one. A refusal wrapped by fmt.Errorf is still found (errors.As).
func TestFailedRequestCostsNoAllocationMore(t *testing.T) {
	fail := status.Error(codes.NotFound, "no such sku")
	if n := testing.AllocsPerRun(200, func() { _ = notRefusedHere(fail, getStock) }); n != 0 {
		t.Errorf("notRefusedHere of a plain status error: %v allocations, want 0", n)
	}
	if r := refusalIn(fmt.Errorf("an interceptor's words: %w", refuse(getStock, status.New(codes.Unavailable, "shed").Proto()))); r == nil || r.method != getStock {
		t.Errorf("a wrapped refusal: found %v, want the refusal of %s", r, getStock)
	}
	if r := refusalIn(fail); r != nil {
		t.Errorf("a plain status error: found the refusal %v, want none", r)
	}

	p := inventoryPolicy()
	p.Shedding = nil
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	base, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	info := &grpc.UnaryServerInfo{FullMethod: getStock}
	handler := func(context.Context, any) (any, error) { return nil, fail }
	n := testing.AllocsPerRun(200, func() {
		if _, err := g.UnaryInterceptor(base, nil, info, handler); status.Code(err) != codes.NotFound {
			t.Fatalf("the failed request: %v, want the handler's NOT_FOUND", err)
		}
	})
	if n != 2 {
		t.Errorf("a failed request: %v allocations, want 2 (the grant and the handler's context), as a served one", n)
	}
}
