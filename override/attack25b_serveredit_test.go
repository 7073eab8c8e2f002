package override_test

import (
	"strings"
	"testing"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// TestAttack25bServerOverrideAfterAnEditIsNotDropped: the client's
// options refuse "a key whose group an earlier edit took away", so an
// override is applied or refused, never dropped. ServerOptions checks
// the keys against the annotated policy, but the server.WithPolicy edit
// it returns applies them to the policy the Guard hands it, after the
// program's own edits, and ignores the error of a key that no longer
// applies: with the program's edit taking ReserveStock's dedup away,
// the operator's dedup.ttl is dropped and the Guard built without a word.
func TestAttack25bServerOverrideAfterAnEditIsNotDropped(t *testing.T) {
	p := &inventoryv1.InventoryServiceServerPolicy
	set, err := override.Parse("o.yaml", []byte(svcYAML("    methods:\n      ReserveStock: {server: {dedup: {ttl: 1h}}}\n")), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := set.ServerOptions(p)
	if err != nil {
		t.Fatal(err)
	}
	dropDedup := server.WithPolicy(p.Name, func(q *policy.Server) { q.Methods[1].Dedup = nil })
	_, err = server.NewGuard([]*policy.Server{p}, append([]server.Option{server.WithStore(server.NewMemoryStore(10)), dropDedup}, opts...)...)
	t.Logf("NewGuard: %v", err)
	if want := inv + ".methods.ReserveStock.server.dedup.ttl"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewGuard: %v; want a refusal naming %s", err, want)
	}
}
