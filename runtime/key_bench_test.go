// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// BenchmarkUnaryHandleKeyed measures a call of a handle whose requests
// carry an idempotency key (26 bytes, as a generated one), around a call
// that does nothing: the key's check is on this path.
func BenchmarkUnaryHandleKeyed(b *testing.B) {
	const method = inventoryv1.InventoryService_ReserveStock_FullMethodName
	p := policy.Service{Name: inventoryService, Methods: []policy.Method{{Name: method,
		IdempotencyKey: "order_id", Timeout: time.Second, Retry: retryPolicy(3)}}}
	rt, err := runtime.NewClient(&p)
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, *inventoryv1.ReserveStockRequest, ...grpc.CallOption) (*inventoryv1.ReserveStockResponse, error) {
		return &inventoryv1.ReserveStockResponse{}, nil
	}
	h, err := runtime.NewUnary(rt, method, noop, runtime.UnaryHooks[inventoryv1.ReserveStockRequest, inventoryv1.ReserveStockResponse]{
		IdempotencyKey: func(in *inventoryv1.ReserveStockRequest) string { return in.GetOrderId() },
	})
	if err != nil {
		b.Fatal(err)
	}
	req := &inventoryv1.ReserveStockRequest{OrderId: "01JDKQ3V8X5T7R9M2N4P6W8Y0Z", Sku: "a", Units: 1}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
