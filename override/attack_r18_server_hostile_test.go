package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
)

// TestAttackR18HostileServerValues: server-side values no operator can have
// meant, each refused with the key named and what is wrong, at Parse or at
// ServerOptions, never a silent default: a limit beyond uint32, a
// fractional or quoted limit, a duration beyond time.Duration, the enum's
// number or its UNSPECIFIED value, the dedup fields the .proto alone owns
// (the header, the final codes), and a default timeout below the minimum
// deadline (every request without a deadline would be refused), named by
// both keys that made it so.
func TestAttackR18HostileServerValues(t *testing.T) {
	for _, tc := range []struct {
		name, svc string // svc: the service's mapping
		want      []string
	}{
		{"limit beyond uint32", `{shedding: {low: 4294967296}}`,
			[]string{inv + ".shedding.low: must be a whole number from 0 to 4294967295, got \"4294967296\""}},
		{"fractional limit", `{shedding: {low: 1.5}}`, []string{inv + ".shedding.low: must be a whole number"}},
		{"quoted limit with a leading zero", `{shedding: {low: "04"}}`, []string{inv + ".shedding.low: must be a whole number", `got "04"`}},
		{"duration beyond time.Duration", `{server: {min_deadline: 3000000h}}`,
			[]string{inv + ".server.min_deadline: not a duration"}},
		{"a duration as protojson's mapping", `{server: {dedup: {ttl: {seconds: 9223372037}}}}`,
			[]string{inv + ".server.dedup.ttl: must be a duration with its unit"}},
		{"the enum's number", `{server: {dedup: {on_store_error: 1}}}`,
			[]string{inv + ".server.dedup.on_store_error: must be one of ON_STORE_ERROR_REFUSE, ON_STORE_ERROR_RUN_WITHOUT_DEDUP, got \"1\""}},
		{"the enum's unspecified value", `{server: {dedup: {on_store_error: ON_STORE_ERROR_UNSPECIFIED}}}`,
			[]string{inv + ".server.dedup.on_store_error: must be one of", `got "ON_STORE_ERROR_UNSPECIFIED"`}},
		{"the key's header", `{server: {dedup: {header: x-key}}}`,
			[]string{inv + ".server.dedup.header: unknown field"}},
		{"the final codes", `{server: {dedup: {final_codes: [UNAVAILABLE]}}}`,
			[]string{inv + ".server.dedup.final_codes: unknown field"}},
		{"default timeout below the minimum deadline", `{server: {default_timeout: 5ms, min_deadline: 1s}}`,
			[]string{inv + ".server.default_timeout", inv + ".server.min_deadline", "DefaultTimeout: 5ms is below MinDeadline (1s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("overrides.yaml", []byte("services:\n  example.inventory.v1.InventoryService: "+tc.svc+"\n"), nil, inventory, payments)
			if err == nil {
				var opts any
				if opts, err = s.ServerOptions(inventoryServer); err == nil {
					t.Fatalf("accepted: %v", opts)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
		})
	}
}
