package override

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Every server-side value an override can set lands in its field of the
// policy ServerOptions hands the Guard (whose options are opaque from
// outside): the four limits, pushback and code of the shedding, a
// service's min_deadline on every method and a method's default_timeout
// on that one, and the TTL, lease and store-error choice of a dedup.
func TestServerLeavesLandInTheirFields(t *testing.T) {
	s, err := Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    shedding: {low: 1, normal: 2, high: 3, critical: 4, pushback: 250ms, code: UNAVAILABLE}
    server: {min_deadline: 20ms}
    methods:
      GetStock: {server: {default_timeout: 400ms}}
      ReserveStock:
        server: {dedup: {ttl: 1h, lease: 3s, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}}
`), nil, &inventoryv1.InventoryServiceResilientPolicy)
	if err != nil {
		t.Fatal(err)
	}
	got := inventoryv1.InventoryServiceServerPolicy.Clone()
	for _, l := range s.targets[got.Name].ordered() {
		if err := applyServerLeaf(&got, l); err != nil {
			t.Fatalf("%s: %v", l.source, err)
		}
	}
	want := policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4}, Pushback: 250 * time.Millisecond, Code: codes.Unavailable}
	if *got.Shedding != want {
		t.Errorf("shedding %+v, want %+v", *got.Shedding, want)
	}
	for _, m := range got.Methods {
		if m.MinDeadline != 20*time.Millisecond {
			t.Errorf("%s: min deadline %s, want the service's 20ms", m.Name, m.MinDeadline)
		}
		if wantTimeout := map[bool]time.Duration{true: 400 * time.Millisecond}[m.Name == inventoryv1.InventoryService_GetStock_FullMethodName]; m.DefaultTimeout != wantTimeout {
			t.Errorf("%s: default timeout %s, want %s", m.Name, m.DefaultTimeout, wantTimeout)
		}
	}
	d := got.Methods[1].Dedup
	if d == nil || d.TTL != time.Hour || d.Lease != 3*time.Second || d.OnStoreError != policy.StoreErrorRunWithoutDedup {
		t.Errorf("ReserveStock's dedup %+v, want 1h, 3s, run without dedup", d)
	}
	if lit := inventoryv1.InventoryServiceServerPolicy; lit.Shedding.Limits.Low != 8 || lit.Methods[1].Dedup.TTL != 24*time.Hour {
		t.Errorf("the generated literal changed: %+v %+v", lit.Shedding, lit.Methods[1].Dedup)
	}
}
