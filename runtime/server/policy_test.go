package server

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestValidateNamesBadFields(t *testing.T) {
	if err := inventoryPolicy().Validate(); err != nil {
		t.Fatalf("the test policy is refused: %v", err)
	}
	cases := []struct {
		edit func(p *policy.Server)
		want string
	}{
		{func(p *policy.Server) { p.Name = "" }, "Name: empty"},
		{func(p *policy.Server) { p.Shedding.Limits.Low = 0 }, "Shedding.Limits.Low: must be at least 1, got 0"},
		{func(p *policy.Server) { p.Shedding.Limits.High = 3 }, "Shedding.Limits.High: 3 is below Limits.Normal (4)"},
		{func(p *policy.Server) { p.Shedding.Pushback = -time.Second }, "Shedding.Pushback: must not be negative"},
		{func(p *policy.Server) { p.Shedding.Code = codes.Internal }, `Shedding.Code: must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "INTERNAL"`},
		{func(p *policy.Server) { p.Methods[0].Name = "/other.Service/GetStock" }, `Methods[0] (/other.Service/GetStock).Name: must be "/example.inventory.v1.InventoryService/"`},
		{func(p *policy.Server) { p.Methods[1].Name = p.Methods[0].Name }, "Name: listed twice"},
		{func(p *policy.Server) { p.Methods[0].Priority = 9 }, "Priority: unknown priority 9"},
		{func(p *policy.Server) { p.Methods[0].MinDeadline = -1 }, "MinDeadline: must not be negative"},
		{func(p *policy.Server) { p.Methods[0].DefaultTimeout = 10 * time.Millisecond }, "DefaultTimeout: 10ms is below MinDeadline (50ms)"},
		{func(p *policy.Server) { p.Methods[1].Dedup.TTL = 0 }, "Methods[1] (/example.inventory.v1.InventoryService/ReserveStock).Dedup.TTL: must be at least 1s, got 0s"},
		{func(p *policy.Server) { p.Methods[1].Dedup.TTL = 500 * time.Millisecond }, "Dedup.TTL: must be at least 1s, got 500ms"},
		{func(p *policy.Server) { p.Methods[1].Dedup.Lease = 2 }, "Dedup.Lease: must be at least 100ms, got 2ns"},
		{func(p *policy.Server) { p.Methods[1].NewResponse = nil }, "NewResponse: required with Dedup"},
		{func(p *policy.Server) { p.Methods[1].Kind = policy.KindBidiStreaming }, "Dedup: only unary methods"},
		{func(p *policy.Server) { p.Methods[1].Dedup.OnStoreError = 7 }, "Dedup.OnStoreError: unknown mode 7"},
		{func(p *policy.Server) { p.Methods[1].Dedup.Header = "Idem-Key" }, `Dedup.Header: "Idem-Key" is not a valid text metadata key`},
		{func(p *policy.Server) { p.Methods[1].Dedup.FinalCodes = policy.CodesOf(codes.OK) }, "Dedup.FinalCodes: OK is not an error code"},
		{func(p *policy.Server) { p.Methods[1].Dedup.Lease = -1 }, "Dedup.Lease: must be at least 100ms, got -1ns"},
	}
	for _, c := range cases {
		p := inventoryPolicy().Clone()
		c.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	// Every problem is named, not just the first.
	p := inventoryPolicy().Clone()
	p.Shedding.Limits.Low = 0
	p.Methods[1].Dedup.TTL = 0
	if err := p.Validate(); err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("want two lines, got %v", err)
	}
}

func TestCloneIsDeep(t *testing.T) {
	p := inventoryPolicy()
	c := p.Clone()
	c.Shedding.Limits.Low = 99
	c.Methods[1].Dedup.TTL = time.Hour
	c.Methods[0].Priority = PriorityLow
	if p.Shedding.Limits.Low == 99 || p.Methods[1].Dedup.TTL == time.Hour || p.Methods[0].Priority == PriorityLow {
		t.Error("editing the clone changed the original")
	}
}

func TestNewGuardRefuses(t *testing.T) {
	p := inventoryPolicy()
	cases := []struct {
		policies []*policy.Server
		opts     []Option
		want     string
	}{
		{[]*policy.Server{p}, nil, "ReserveStock deduplicates by idempotency key: give NewGuard a store with WithStore"},
		{[]*policy.Server{p, p}, []Option{WithStore(NewMemoryStore(1))}, "given twice"},
		{[]*policy.Server{nil}, nil, "policy 0 is nil"},
		{[]*policy.Server{p}, []Option{nil}, "option 0 is nil"},
		{[]*policy.Server{p}, []Option{WithStore(NewMemoryStore(1)), WithPolicy("nope", func(*policy.Server) {})}, `WithPolicy("nope")`},
		{[]*policy.Server{p}, []Option{WithStore(NewMemoryStore(1)), WithPolicy(inventory, func(p *policy.Server) { p.Shedding.Limits.Critical = 1 })}, "Shedding.Limits.Critical: 1 is below Limits.High (6)"},
	}
	for _, c := range cases {
		if _, err := NewGuard(c.policies, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	// An edit at start-up applies to a copy: the literal is unchanged.
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1)),
		WithPolicy(inventory, func(p *policy.Server) { p.Shedding.Limits = policy.Limits{Low: 10, Normal: 20, High: 30, Critical: 40} }))
	if err != nil {
		t.Fatal(err)
	}
	if g.services[inventory].shed.limits[PriorityCritical] != 40 || p.Shedding.Limits.Critical != 8 {
		t.Error("WithPolicy not applied to a copy")
	}
	if _, ok := g.Stats("nope"); ok {
		t.Error("Stats of an unknown service")
	}
}

func TestPriorityNames(t *testing.T) {
	for p := PriorityLow; p <= PriorityCritical; p++ {
		if q, ok := priority.Parse(p.String()); !ok || Priority(q) != p {
			t.Errorf("%s does not round-trip", p)
		}
	}
	if _, ok := priority.Parse("unspecified"); ok {
		t.Error("unspecified parsed")
	}
	if Priority(9).String() != "Priority(9)" || policy.StoreErrorMode(5).String() != "StoreErrorMode(5)" {
		t.Error("unknown values")
	}
}

// TestMinimumsAgreeWithThePlugin: the plugin and the override loader
// refuse what NewGuard refuses.
func TestMinimumsAgreeWithThePlugin(t *testing.T) {
	// At each side of each minimum, the plugin's check and NewGuard agree.
	for _, tc := range []struct {
		field string
		d     time.Duration
	}{
		{"ttl", policy.MinTTL - 1}, {"ttl", policy.MinTTL},
		{"lease", policy.MinLease - 1}, {"lease", policy.MinLease},
		{"lease", policy.MaxLease}, {"lease", policy.MaxLease + 1},
	} {
		p := inventoryPolicy()
		if tc.field == "ttl" {
			p.Methods[1].Dedup.TTL = tc.d
		} else {
			p.Methods[1].Dedup.Lease = tc.d
		}
		_, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1)))
		if plugin := rules.DedupMinimum(tc.field, tc.d); (plugin != "") != (err != nil) {
			t.Errorf("dedup %s %v: the plugin says %q, NewGuard %v", tc.field, tc.d, plugin, err)
		}
	}
	// A 2 ns lease is refused by NewGuard, not left to crash a goroutine.
	p := inventoryPolicy()
	p.Methods[1].Dedup.Lease = 2
	if _, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1))); err == nil || !strings.Contains(err.Error(), "Dedup.Lease: must be at least 100ms") {
		t.Errorf("NewGuard with a 2ns lease: %v", err)
	}
	// A lease of centuries is refused too, naming the value and the bound.
	p.Methods[1].Dedup.Lease = math.MaxInt64
	if _, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1))); err == nil ||
		!strings.Contains(err.Error(), "Dedup.Lease: must be at most 1h0m0s, got 2562047h47m16.854775807s") {
		t.Errorf("NewGuard with the longest lease: %v", err)
	}
}
