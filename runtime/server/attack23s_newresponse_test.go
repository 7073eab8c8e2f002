package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23sNewGuardRefusesANewResponseThatCannotReplay: a
// hand-written policy (or a WithPolicy edit) whose NewResponse returns
// nil built a Guard that panicked at the first replay, in gRPC's handler
// goroutine where nothing recovers it: the server went down at the first
// repeat of a key, long after it started (a nil pointer failed every
// replay with INTERNAL instead). One that returns another
// method's response type replayed another message's decoding of the kept
// bytes. NewGuard refuses both, naming the method and the types.
func TestAttack23sNewGuardRefusesANewResponseThatCannotReplay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		newFn func() proto.Message
		want  []string
	}{
		{"nil", func() proto.Message { return nil }, []string{reserveStock, "NewResponse returns nil"}},
		{"a nil pointer", func() proto.Message { return (*inventoryv1.ReserveStockResponse)(nil) }, []string{reserveStock, "(*inventoryv1.ReserveStockResponse)(nil)"}},
		{"another method's response", func() proto.Message { return new(inventoryv1.GetStockResponse) },
			[]string{reserveStock, "example.inventory.v1.GetStockResponse", "answers example.inventory.v1.ReserveStockResponse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)),
				WithPolicy(inventory, func(p *policy.Server) { p.Methods[1].NewResponse = tc.newFn }))
			if err == nil {
				t.Fatal("NewGuard accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to say %q", err, w)
				}
			}
		})
	}
	if _, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10))); err != nil {
		t.Errorf("the generated form, new(ReserveStockResponse): %v", err)
	}
}
