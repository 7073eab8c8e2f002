package server

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// reserveTwice sends ReserveStock twice with one idempotency key through
// a Guard built with opts and returns how many times the handler ran.
func reserveTwice(t *testing.T, opts ...Option) int64 {
	t.Helper()
	srv := &inventoryServer{}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, opts...)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-25b", Sku: "a", Units: 1}
	for i := range 2 {
		if _, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-25b"), req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return srv.reserveCalls.Load()
}

// TestAttack25bGuardEditKeepsEachMethodsEntry: the Guard finds a method's
// policy by its name, so a server.WithPolicy edit (a program's, or the
// one override's ServerOptions returns) that left a method without its
// entry left it unguarded: no dedup, no shedding by its priority, no
// minimum deadline, with no error. A renamed ReserveStock ran twice for
// one key on a real server. The Guard now refuses, naming the method, an
// edit that removes or renames an entry or changes a Kind, as the client
// constructor does; reordering the entries is harmless.
func TestAttack25bGuardEditKeepsEachMethodsEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *policy.Server)
		want []string
	}{
		{"entry removed", func(p *policy.Server) { p.Methods = slices.Delete(p.Methods, 1, 2) },
			[]string{reserveStock + ": its entry was removed or renamed"}},
		{"entry renamed", func(p *policy.Server) { p.Methods[1].Name += "s" },
			[]string{reserveStock + ": its entry was removed or renamed", reserveStock + "s: is not a method"}},
		{"every entry removed", func(p *policy.Server) { p.Methods = nil },
			[]string{getStock + ": its entry", reserveStock + ": its entry", watchStock + ": its entry"}},
		{"entry listed twice", func(p *policy.Server) { p.Methods = append(p.Methods, p.Methods[1]) },
			[]string{reserveStock + ": has 2 entries: keep exactly one"}},
		{"a stream's kind changed", func(p *policy.Server) { p.Methods[2].Kind = policy.KindUnary },
			[]string{watchStock + ": Kind changed from server-streaming to unary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithPolicy(inventory, tc.edit))
			if err == nil {
				if tc.name == "entry renamed" {
					t.Errorf("accepted: ReserveStock ran %d times for one key", reserveTwice(t, WithPolicy(inventory, tc.edit)))
				} else {
					t.Error("accepted")
				}
				return
			}
			for _, w := range tc.want {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Errorf("error %q\nsays %q %d times, want once", err, w, n)
				}
			}
			if strings.Contains(err.Error(), "listed twice") {
				t.Errorf("error %q\nreports the method twice, once as Validate's", err)
			}
		})
	}
	// Reordered, each method keeps its own entry: one key, one run.
	if n := reserveTwice(t, WithPolicy(inventory, func(p *policy.Server) { slices.Reverse(p.Methods) })); n != 1 {
		t.Errorf("reordered entries: ReserveStock ran %d times for one key, want 1", n)
	}
}
