package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
)

// TestPatternOverrides: an operator can tune the rate limit, the cache's
// TTLs and hedging, with the plugin's rules.
func TestPatternOverrides(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    rate_limit: {requests_per_second: 50}
    methods:
      GetStock:
        cache: {fresh_ttl: 2s, stale_ttl: 10m}
      ReserveStock:
        rate_limit: {per_method: true, requests_per_second: 5, burst: 2}
`), []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RATE_LIMIT__MAX_WAIT=5ms"}, inventory, payments)
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, s).Policy()
	if r := p.RateLimit; r.RequestsPerSecond != 50 || r.Burst != 100 || r.MaxWait != 5*time.Millisecond {
		t.Errorf("service rate limit %+v, want 50/s, the annotated burst 100, max wait 5ms", r)
	}
	if c := p.Methods[0].Cache; c.FreshTTL != 2*time.Second || c.StaleTTL != 10*time.Minute || c.MaxEntries != 10000 {
		t.Errorf("GetStock cache %+v", c)
	}
	if r := p.Methods[1].RateLimit; r == nil || r.RequestsPerSecond != 5 || r.Burst != 2 {
		t.Errorf("ReserveStock rate limit %+v", r)
	}
}

func TestPatternOverridesRefused(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`methods: {GetStock: {cache: {fresh_ttl: 10m}}}`, "in GetStock, stale_ttl 5m0s is shorter than fresh_ttl 10m0s"},
		{`methods: {GetStock: {cache: {key_fields: [id]}}}`, "part of the service's contract"},
		{`methods: {ReserveStock: {cache: {fresh_ttl: 1s}}}`, "the method has no cache annotated"},
		{`methods: {GetStock: {hedging: {max_copies: 3}}}`, "hedging.delay: is required"},
		{`methods: {ReserveStock: {hedging: {delay: 50ms}}}`, "ReserveStock is not idempotent"},
		{`hedging: {delay: 50ms}`, "hedging is decided method by method"},
		{`rate_limit: {requests_per_second: 0}`, "must be a positive, finite number"},
		{`methods: {GetStock: {rate_limit: {burst: 3}}}`, "the method has no rate limit of its own"},
		{`methods: {GetStock: {generate_idempotency_key: true}}`, "part of the service's contract"},
	} {
		_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n    "+c.yaml+"\n"), nil, inventory, payments)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}
