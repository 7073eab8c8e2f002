// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// TestNewcomerNilObserver: the README's runtime option table says a nil
// WithClock or WithRegisterer is refused by the constructor; WithObserver
// takes a func, and a nil one (an observer chosen at start-up and left
// unset) must be refused the same way, or ignored, never called at the
// first event (here the fallback answering a call to a dependency that is
// down, on the caller's goroutine). It holds: the constructor refuses it.
func TestNewcomerNilObserver(t *testing.T) {
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	var observe func(runtime.Event)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(withoutCacheAndRateLimit), runtime.WithObserver(observe)},
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
	})
	if err != nil {
		if !strings.Contains(err.Error(), "WithObserver(nil)") {
			t.Fatalf("constructor with WithObserver(nil): %v, want an error naming the option", err)
		}
		t.Logf("refused: %v", err)
		return // refused at construction: the promise held
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a call of a client built with WithObserver(nil) panicked at its first event: %v", r)
		}
	}()
	resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"})
	if err != nil || resp.GetUnits() != -1 {
		t.Errorf("GetStock with the dependency down: %v, %v; want the fallback's answer", resp, err)
	}
	if n := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); n == 0 {
		t.Errorf("server saw %d calls; want the attempts to have reached it", n)
	}
}
