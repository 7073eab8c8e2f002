// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestBytesKeyLimitIsTheLengthAsSent: a bytes idempotency key travels in
// base64 (KeyFromBytes), so the server's limit of 255 bytes is on the
// encoded key: 191 bytes (255 characters) reach a real server as they were
// encoded, 192 (256 characters) are refused with INVALID_ARGUMENT naming
// the field, the length as sent and base64, before anything is sent.
func TestBytesKeyLimitIsTheLengthAsSent(t *testing.T) {
	atkNoLeak(t)
	const method = inventoryv1.InventoryService_ReserveStock_FullMethodName
	var mu sync.Mutex
	var seen []string
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, strings.Join(md.Get(runtime.IdempotencyKeyHeader), ","))
		mu.Unlock()
		return h(ctx, req)
	}
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{grpc.ChainUnaryInterceptor(record)})
	p := policy.Service{Name: inventoryService, Methods: []policy.Method{{Name: method,
		IdempotencyKey: "order_id", Timeout: time.Second}}}
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var key []byte // the bytes field the hook reads
	h, err := runtime.NewUnary(rt, method, plain.ReserveStock,
		runtime.UnaryHooks[inventoryv1.ReserveStockRequest, inventoryv1.ReserveStockResponse]{
			IdempotencyKey: func(*inventoryv1.ReserveStockRequest) string { return runtime.KeyFromBytes(key) },
		})
	if err != nil {
		t.Fatal(err)
	}
	req := &inventoryv1.ReserveStockRequest{Sku: "a", Units: 1}

	key = bytes.Repeat([]byte{0xfb}, contract.MaxIdempotencyKeyLength*3/4) // 191 bytes: 255 characters
	want := base64.RawURLEncoding.EncodeToString(key)
	if len(want) != contract.MaxIdempotencyKeyLength {
		t.Fatalf("the longest key is %d characters, want %d", len(want), contract.MaxIdempotencyKeyLength)
	}
	if _, err := h.Call(context.Background(), req); err != nil {
		t.Fatalf("a bytes key of %d bytes (%d as sent): %v, want it sent", len(key), len(want), err)
	}

	key = append(key, 0xfb) // 192 bytes: 256 characters
	_, err = h.Call(context.Background(), req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "order_id") ||
		!strings.Contains(err.Error(), "256 bytes as sent") || !strings.Contains(err.Error(), "base64") {
		t.Errorf("a bytes key of %d bytes (256 as sent): %v, want INVALID_ARGUMENT naming order_id, 256 bytes as sent and base64", len(key), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != want {
		t.Errorf("the server received %d calls (keys of %v characters), want one with the 255-character key", len(seen), lengths(seen))
	}
}
