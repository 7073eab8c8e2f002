// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
)

// TestNewcomerTypedNilConnection: grpc.NewClient returns a nil
// *grpc.ClientConn with its error. A newcomer who passes that on (the
// error checked one line too late, or logged and ignored) hands the
// generated constructor a non-nil grpc.ClientConnInterface holding a nil
// pointer, which the generated `cc == nil` does not see. The README
// ("Errors") promises that a client built on a nil connection fails each
// call with FAILED_PRECONDITION and sends nothing; before the fix in
// Client.Conn the first call panicked inside grpc-go (nil pointer
// dereference in (*ClientConn).Invoke).
func TestNewcomerTypedNilConnection(t *testing.T) {
	cc, err := grpc.NewClient("dns:///bad%%target")
	if cc != nil || err == nil {
		t.Fatalf("grpc.NewClient of a bad target = %v, %v; the test needs the nil *ClientConn it returns", cc, err)
	}
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		// Refusing at construction would keep the promise as well.
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("constructor on a typed-nil connection: %v, want INVALID_ARGUMENT or a client", err)
		}
		return
	}
	call := func(name string, f func() error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s on a client built on a typed-nil *grpc.ClientConn panicked: %v", name, r)
			}
		}()
		if err := f(); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s on a client built on a typed-nil *grpc.ClientConn: %v, want FAILED_PRECONDITION", name, err)
		}
	}
	ctx := context.Background()
	call("GetStock", func() error {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
		return err
	})
	call("ReserveStock", func() error {
		_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o1", Sku: "a", Units: 1})
		return err
	})
	call("WatchStock", func() error {
		_, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		return err
	})
	call("StockReport", func() error {
		_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{})
		return err
	})
}
