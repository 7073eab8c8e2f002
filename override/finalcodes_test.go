package override_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestServerOptionsRefuseTheCallersEndingAsAFinalCode: an override file
// names no final codes (they are set in Go), but the policy it is applied
// to is checked whole: one whose dedup keeps DEADLINE_EXCEEDED or
// CANCELLED is refused, the method named, before any Guard is built.
func TestServerOptionsRefuseTheCallersEndingAsAFinalCode(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`{services: {example.inventory.v1.InventoryService: {methods: {ReserveStock: {server: {dedup: {ttl: 1h}}}}}}}`), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []codes.Code{codes.Canceled, codes.DeadlineExceeded} {
		p := inventoryServer.Clone()
		for i := range p.Methods {
			if d := p.Methods[i].Dedup; d != nil {
				d.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(c)
			}
		}
		_, err := s.ServerOptions(&p)
		want := "Methods[1] (/example.inventory.v1.InventoryService/ReserveStock).Dedup.FinalCodes: holds "
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "whose caller cancelled it or whose deadline passed") {
			t.Errorf("FinalCodes with %v: %v, want it refused at %q", c, err, want)
		}
	}
}
