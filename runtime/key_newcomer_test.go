// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

// TestNewcomerNonASCIIStringKey: the README's option table says an
// idempotency_key may be a string field, "whose value is sent as
// idempotency-key metadata"; a bytes key is base64-encoded "so that any
// value travels in gRPC metadata", a string key is sent as it is. gRPC
// metadata values must be printable ASCII, so a request whose key field
// holds UTF-8 (an order id "заказ-1"), a tab or a newline fails in grpc-go
// with INTERNAL, "header key "idempotency-key" contains value with
// non-printable ASCII characters", on every call, never reaching the
// server, and without naming the request field or how to mend it. With a
// ReserveStockFallback, the fallback is called with that INTERNAL and its
// answer returned as a success, for a request that never left the process
// (seen in a scratch module built from the README). Either the key should
// travel (encoded, the same on every attempt) or the call be refused with
// INVALID_ARGUMENT naming the field, before any fallback.
func TestNewcomerNonASCIIStringKey(t *testing.T) {
	t.Skip(`BROKEN: a string idempotency key holding non-ASCII (or a tab, a newline) makes every call fail with grpc-go's INTERNAL "contains value with non-printable ASCII characters", unsent and not naming the field`)
	srv, cc := startFault(t, server.Healthy)
	c := invClient(t, cc, nil, nil)
	for _, id := range []string{"заказ-1", "tab\there", "line\nbreak"} {
		_, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "a", Units: 1})
		if err == nil {
			continue // the key travelled
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "order_id") {
			t.Errorf("ReserveStock with order_id %q: %v; want the key sent, or INVALID_ARGUMENT naming order_id", id, err)
		}
	}
	if n := srv.Calls(inventoryv1.InventoryService_ReserveStock_FullMethodName); n != 3 {
		t.Logf("server saw %d of 3 keyed calls", n)
	}
}
