// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestNewcomerTypedNilStore: a store chosen at start-up (`var store
// *server.MemoryStore; if single { store = server.NewMemoryStore(n) }`)
// and passed on unset is a non-nil Store holding a nil pointer. NewGuard
// refuses a missing store for a method that deduplicates ("give NewGuard a
// store with WithStore"); the typed nil must be refused the same way, or at
// least make a keyed request fail with a status, not panic the server.
func TestNewcomerTypedNilStore(t *testing.T) {
	var store *MemoryStore
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
	if err == nil {
		srv := &inventoryServer{}
		cc := dial(t, serve(t, srv, g.ServerOptions()...))
		client := inventoryv1.NewInventoryServiceClient(cc)
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 2*time.Second), "idempotency-key", "k1")
		// Before the fix this request panicked the server process
		// ((*MemoryStore).Claim on a nil receiver, on gRPC's goroutine).
		_, err = client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o1", Sku: "a", Units: 1})
		t.Fatalf("NewGuard accepted WithStore((*MemoryStore)(nil)); the keyed request got %v", err)
	}
	want := reserveStock + " deduplicates by idempotency key: give NewGuard a store with WithStore"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("NewGuard with a typed-nil store: %v, want the error of a missing store (%q)", err, want)
	}
}
