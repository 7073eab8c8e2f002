// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime"
)

// keyedClient is the generated inventory client on a loopback server that
// records the idempotency-key each ReserveStock it receives carries, with
// a ReserveStockFallback that counts its calls and answers, and the
// client's metrics in reg.
func keyedClient(t *testing.T) (c *inventoryv1.InventoryServiceResilientClient, keys func() []string, fellBack func() int, reg *prometheus.Registry) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == inventoryv1.InventoryService_ReserveStock_FullMethodName {
			md, _ := metadata.FromIncomingContext(ctx)
			mu.Lock()
			seen = append(seen, strings.Join(md.Get(runtime.IdempotencyKeyHeader), ","))
			mu.Unlock()
		}
		return h(ctx, req)
	}
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{grpc.ChainUnaryInterceptor(record)})
	reg = prometheus.NewRegistry()
	var fb int
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(withoutCacheAndRateLimit), runtime.WithRegisterer(reg)},
		ReserveStockFallback: func(_ context.Context, req *inventoryv1.ReserveStockRequest, _ error) (*inventoryv1.ReserveStockResponse, error) {
			mu.Lock()
			fb++
			mu.Unlock()
			return &inventoryv1.ReserveStockResponse{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	keys = func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
	fellBack = func() int { mu.Lock(); defer mu.Unlock(); return fb }
	return c, keys, fellBack, reg
}

// countedSamples is the sum of every counter and every histogram's count
// in reg: what the client counted of its attempts, failures and fallbacks.
func countedSamples(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return n
}

// TestNewcomerNonASCIIStringKey: the README's option table says an
// idempotency_key may be a string field, "whose value is sent as
// idempotency-key metadata"; a bytes key is base64-encoded "so that any
// value travels in gRPC metadata", a string key is sent as it is. gRPC
// metadata values must be printable ASCII, so a request whose key field
// holds UTF-8 (an order id "заказ-1"), a tab or a newline failed in grpc-go
// with INTERNAL, "header key "idempotency-key" contains value with
// non-printable ASCII characters", on every call, never reaching the
// server, and without naming the request field or how to mend it. With a
// ReserveStockFallback, the fallback was called with that INTERNAL and its
// answer returned as a success, for a request that never left the process.
// The key is not encoded (the server, Envoy and clients in other languages
// read it as sent): the call is refused with INVALID_ARGUMENT naming the
// method and the field, before any layer: nothing sent, no fallback,
// nothing counted, the breaker untouched.
func TestNewcomerNonASCIIStringKey(t *testing.T) {
	c, keys, fellBack, reg := keyedClient(t)
	bad := []string{"заказ-1", "tab\there", "line\nbreak", "nul\x00", "del\x7f", "\xff"}
	for range 5 { // past the breaker's threshold, were the refusals counted
		for _, id := range bad {
			_, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "a", Units: 1})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "order_id") ||
				!strings.Contains(err.Error(), inventoryv1.InventoryService_ReserveStock_FullMethodName) ||
				!strings.Contains(err.Error(), "printable ASCII") {
				t.Fatalf("ReserveStock with order_id %q: %v; want INVALID_ARGUMENT naming the method, order_id and printable ASCII", id, err)
			}
		}
	}
	if got := keys(); len(got) != 0 {
		t.Errorf("the server received %d ReserveStock calls (keys %q), want none", len(got), got)
	}
	if n := fellBack(); n != 0 {
		t.Errorf("the fallback answered %d refused calls, want none", n)
	}
	if n := countedSamples(t, reg); n != 0 {
		t.Errorf("the metrics counted %v samples of refused calls, want none", n)
	}
	if s, _ := c.Runtime().BreakerState(inventoryv1.InventoryService_ReserveStock_FullMethodName); s != runtime.StateClosed {
		t.Errorf("breaker %v after refused keys, want closed", s)
	}

	// Every printable ASCII byte travels as it is, spaces included, and the
	// client keeps working after the refusals.
	var printable []byte
	for b := byte(0x20); b <= 0x7e; b++ {
		printable = append(printable, b)
	}
	good := []string{"order-1", string(printable)}
	for _, id := range good {
		if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "a", Units: 1}); err != nil {
			t.Errorf("ReserveStock with order_id %q: %v", id, err)
		}
	}
	if got := keys(); len(got) != len(good) || got[0] != good[0] || got[1] != good[1] {
		t.Errorf("the server received keys %q, want %q", got, good)
	}
}

// TestKeyLongerThanTheServerKeepsIsRefusedBeforeSending: the server
// refuses an idempotency key longer than contract.MaxIdempotencyKeyLength;
// the client refuses it first, INVALID_ARGUMENT naming the field and the
// limit, nothing sent and no fallback, and sends one of exactly that
// length.
func TestKeyLongerThanTheServerKeepsIsRefusedBeforeSending(t *testing.T) {
	c, keys, fellBack, reg := keyedClient(t)
	long := strings.Repeat("k", contract.MaxIdempotencyKeyLength+1)
	_, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: long, Sku: "a", Units: 1})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "order_id") || !strings.Contains(err.Error(), "255") {
		t.Errorf("a key of %d bytes: %v, want INVALID_ARGUMENT naming order_id and the limit", len(long), err)
	}
	if len(keys()) != 0 || fellBack() != 0 || countedSamples(t, reg) != 0 {
		t.Errorf("a refused long key: %d calls received, %d fallbacks, %v samples counted; want none", len(keys()), fellBack(), countedSamples(t, reg))
	}
	longest := long[1:]
	if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: longest, Sku: "a", Units: 1}); err != nil {
		t.Errorf("a key of %d bytes: %v, want it sent", len(longest), err)
	}
	if got := keys(); len(got) != 1 || got[0] != longest {
		t.Errorf("the server received %d calls (key lengths %v), want the one with the longest key", len(got), lengths(got))
	}
}

// lengths are the lengths of keys, for a failure's message.
func lengths(keys []string) []int {
	var n []int
	for _, k := range keys {
		n = append(n, len(k))
	}
	return n
}
