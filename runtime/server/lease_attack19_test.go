package server

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack19GuardDedupLeaseBounds: NewGuard holds a lease edited in Go
// (WithPolicy) to [100 ms, 1 h] with zero meaning the default, the bounds
// accepted, and names the field, the value and the bound when it refuses.
func TestAttack19GuardDedupLeaseBounds(t *testing.T) {
	for _, tc := range []struct {
		lease time.Duration
		want  string
	}{
		{time.Hour, ""},
		{100 * time.Millisecond, ""},
		{0, ""},
		{time.Hour + 1, "Dedup.Lease: must be at most 1h0m0s, got 1h0m0.000000001s"},
		{math.MaxInt64, "Dedup.Lease: must be at most 1h0m0s, got 2562047h47m16.854775807s"},
		{100*time.Millisecond - 1, "Dedup.Lease: must be at least 100ms, got 99.999999ms"},
		{-1, "Dedup.Lease: must be at least 100ms, got -1ns"},
		{math.MinInt64, "Dedup.Lease: must be at least 100ms, got -2562047h47m16.854775808s"},
	} {
		g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)),
			WithPolicy(inventory, func(p *policy.Server) { p.Methods[1].Dedup.Lease = tc.lease }))
		switch {
		case tc.want == "" && (err != nil || g == nil):
			t.Errorf("lease %v refused: %v", tc.lease, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "ReserveStock") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("lease %v: %v; want a refusal naming ReserveStock and saying %q", tc.lease, err, tc.want)
		}
	}
}
