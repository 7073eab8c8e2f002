package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
)

// benchUnary measures one request of method through the Guard's unary
// interceptor alone (no tap, no network): the Guard's own cost per call.
func benchUnary(b *testing.B, p *policy.Server, method string) {
	benchUnaryIn(b, context.Background(), p, method)
}

// benchUnaryIn is benchUnary with the request's context made from base:
// one holding a gRPC stream has the Guard wrap it for the handler.
func benchUnaryIn(b *testing.B, base context.Context, p *policy.Server, method string) {
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(base, time.Hour)
	defer cancel()
	info := &grpc.UnaryServerInfo{FullMethod: method}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := g.UnaryInterceptor(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGuardUnaryShed(b *testing.B) { benchUnary(b, inventoryPolicy(), getStock) }

func BenchmarkGuardUnaryNoShed(b *testing.B) {
	p := inventoryPolicy()
	p.Shedding = nil
	benchUnary(b, p, getStock)
}

// BenchmarkGuardUnaryNoShedStream is BenchmarkGuardUnaryNoShed with a
// gRPC stream in the context, as a server gives one: the Guard hands the
// handler the stream wrapped (markless), in the allocation of the
// handler's context.
func BenchmarkGuardUnaryNoShedStream(b *testing.B) {
	p := inventoryPolicy()
	p.Shedding = nil
	benchUnaryIn(b, grpc.NewContextWithServerTransportStream(context.Background(), fakeTransportStream{}), p, getStock)
}

func BenchmarkGuardUnaryUnheld(b *testing.B) {
	benchUnary(b, inventoryPolicy(), "/other.v1.Other/Call")
}

// TestGrantAllocatesOnlyItsContext: granting a request costs the one
// context value that carries the grant, with or without a place in
// flight (the grant of a shed request is its admission's own); only a
// request another Guard granted first gets a grant of its own.
func TestGrantAllocatesOnlyItsContext(t *testing.T) {
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	m := g.methods[getStock]
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = withGrant(ctx, m, PriorityHigh, nil) }); n != 1 {
		t.Errorf("a grant without a place: %v allocations, want 1 (the context value)", n)
	}
	a := &admission{}
	if n := testing.AllocsPerRun(100, func() { _ = withGrant(ctx, m, PriorityHigh, a) }); n != 1 {
		t.Errorf("a grant with a place: %v allocations, want 1 (the context value)", n)
	}
	if gr := grantOf(withGrant(ctx, m, PriorityHigh, a), m); gr != &a.gr || gr.a != a || gr.p != PriorityHigh {
		t.Errorf("grant with a place: %+v, want the admission's own, of priority high and place a", gr)
	}
	outer := withGrant(ctx, m, PriorityLow, nil)
	if n := testing.AllocsPerRun(100, func() { _ = withGrant(outer, m, PriorityHigh, nil) }); n != 2 {
		t.Errorf("a grant above another Guard's: %v allocations, want 2 (the grant and the context value)", n)
	}
}
