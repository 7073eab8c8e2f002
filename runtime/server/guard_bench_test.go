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
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
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

func BenchmarkGuardUnaryUnheld(b *testing.B) {
	benchUnary(b, inventoryPolicy(), "/other.v1.Other/Call")
}
