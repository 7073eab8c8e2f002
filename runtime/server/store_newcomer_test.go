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

// TestNewcomerWithPolicyUnknownService: the README's server snippet edits
// a service by its full name, server.WithPolicy("example.inventory.v1.
// InventoryService", …). A newcomer who writes the short name
// ("InventoryService"), or the name of a service the Guard was not given,
// is told "no such service among the policies, or a nil edit": which of
// the two, and what the services are, the message does not say (the
// client-side override loader names the services it knows). The error
// should name the full names the Guard holds.
func TestNewcomerWithPolicyUnknownService(t *testing.T) {
	_, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)),
		WithPolicy("InventoryService", func(p *policy.Server) { p.Shedding.Limits.Low = 1 }))
	if err == nil {
		t.Fatal("NewGuard accepted WithPolicy of an unknown service")
	}
	if !strings.Contains(err.Error(), `WithPolicy("InventoryService"): unknown service`) || !strings.Contains(err.Error(), "holds "+inventory) || strings.Contains(err.Error(), "nil edit") {
		t.Errorf("WithPolicy(%q): %v; want the error to say the service is unknown and name %s", "InventoryService", err, inventory)
	}
}

// TestWithPolicyNilEdit: a nil edit of a service the Guard holds is its
// own mistake, told as such, not as an unknown service.
func TestWithPolicyNilEdit(t *testing.T) {
	_, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithPolicy(inventory, nil))
	if err == nil {
		t.Fatal("NewGuard accepted WithPolicy with a nil edit")
	}
	if !strings.Contains(err.Error(), "the edit is nil") || strings.Contains(err.Error(), "unknown service") {
		t.Errorf("WithPolicy(%q, nil): %v; want it to say the edit is nil", inventory, err)
	}
	_, err = NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithCheckedPolicy(inventory, nil))
	if err == nil || !strings.Contains(err.Error(), "WithCheckedPolicy(") || !strings.Contains(err.Error(), "the edit is nil") {
		t.Errorf("WithCheckedPolicy(%q, nil): %v; want it named, and to say the edit is nil", inventory, err)
	}
}

// TestWithLoggerNil: a nil logger is refused, naming the option, as the
// client's WithLogger(nil) is: never a logger the caller meant to pass
// dropped in silence (a newcomer's review found the client's accepted).
func TestWithLoggerNil(t *testing.T) {
	_, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithLogger(nil))
	if err == nil || !strings.Contains(err.Error(), "WithLogger(nil)") {
		t.Errorf("WithLogger(nil): %v, want an error naming WithLogger(nil)", err)
	}
}
