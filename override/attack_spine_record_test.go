package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Attacks on issue 11's spine at the override boundary: the record
// Client.Changes shows is the truth of the policy in force, and an
// override is applied or refused, never dropped.

// The record agrees with a comparison of the policy before and after, for
// the values the other record tests leave out: a priority, a count-based
// window (whose 0 both write "none"), hedging added, a method's own
// breaker, a rate limit's rate, timeouts from the service.
func TestAttackSpineRecordAgreesOnMoreValues(t *testing.T) {
	for name, tc := range map[string]struct {
		file  string
		least int
	}{
		"count window": {`
services:
  example.inventory.v1.InventoryService:
    circuit_breaker: {window_calls: 50}
`, 1},
		"hedging added": {`
services:
  example.inventory.v1.InventoryService:
    methods:
      StockReport: {hedging: {delay: 50ms, max_copies: 3}}
`, 3},
		"own breaker": {`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {circuit_breaker: {per_method: true, cool_down: 7s}}
`, 6},
		"rate and burst": {`
services:
  example.inventory.v1.InventoryService:
    rate_limit: {requests_per_second: 200}
`, 1},
		"stream timeout from the service": {`
services:
  example.inventory.v1.InventoryService:
    timeout: 20ms
    overall_timeout: 40ms
`, 8},
	} {
		t.Run(name, func(t *testing.T) { agree(t, tc.file, nil, tc.least) })
	}
}

// What a key moved shows the value in force, and a value two keys set
// shows the later key as its source (the README's precedence), whichever
// level each is at.
func TestAttackSpineLastSourceIsShown(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	s, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    timeout: 250ms
    methods:
      GetStock: {timeout: 100ms}
      ReserveStock: {timeout: 200ms}
`), []string{svc + "TIMEOUT=50ms", svc + "METHODS__RESERVESTOCK__TIMEOUT=70ms"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	want := map[string]runtime.Change{
		"methods.GetStock.timeout":     {Annotated: "300ms", Value: "50ms", Source: svc + "TIMEOUT"},
		"methods.ReserveStock.timeout": {Annotated: "300ms", Value: "70ms", Source: svc + "METHODS__RESERVESTOCK__TIMEOUT"},
		"methods.StockReport.timeout":  {Annotated: "300ms", Value: "50ms", Source: svc + "TIMEOUT"},
		"methods.WatchStock.timeout":   {Annotated: "1m0s", Value: "50ms", Source: svc + "TIMEOUT"},
	}
	got := changesByKey(rt)
	for k, w := range want {
		if w.Key = k; got[k] != w {
			t.Errorf("%s = %+v, want %+v", k, got[k], w)
		}
	}
	p := rt.Policy()
	for _, m := range p.Methods {
		w := want["methods."+m.Name[strings.LastIndexByte(m.Name, '/')+1:]+".timeout"].Value
		if m.Timeout.String() != w {
			t.Errorf("%s: timeout in force %s, Changes says %s", m.Name, m.Timeout, w)
		}
	}
}

// A program's own WithPolicy edit placed before the overrides may take
// away what an override tunes (a cache, a method's own bulkhead). The
// override then cannot apply: the client must be refused, naming the key,
// and not built with the override silently dropped (nor panic).
func TestAttackSpineOverrideAfterAnEditThatRemovedItsGroup(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		edit func(p *policy.Service)
		key  string
	}{
		"cache removed": {`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {cache: {max_entries: 5}}
`, func(p *policy.Service) { p.Methods[0].Cache = nil }, "methods.GetStock.cache.max_entries"},
		"own bulkhead removed": {`
services:
  example.inventory.v1.InventoryService:
    methods:
      WatchStock: {bulkhead: {permits: 2}}
`, func(p *policy.Service) { p.Methods[2].Bulkhead = nil }, "methods.WatchStock.bulkhead.permits"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := override.Parse("o.yaml", []byte(tc.file), nil, inventory)
			if err != nil {
				t.Fatal(err)
			}
			opts := append([]runtime.Option{runtime.WithPolicy(tc.edit)}, s.Options(inventory)...)
			var rt *runtime.Client
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("NewClient panicked: %v", r)
					}
				}()
				rt, err = runtime.NewClient(inventory, opts...)
			}()
			if err == nil {
				t.Fatalf("built with the override %s silently dropped; changes %+v", tc.key, rt.Changes())
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("err = %v, want it to name %s", err, tc.key)
			}
		})
	}
}

// The record of an override is what it did to the policy it was given,
// also after an earlier edit: the value before it is the edit's, and the
// change is listed from the annotation, with the override as its source.
func TestAttackSpineRecordAfterAnEdit(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {timeout: 100ms}
`), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]runtime.Option{runtime.WithPolicyFrom("edit", func(p *policy.Service) {
		p.Methods[0].Timeout = 200 * time.Millisecond
		p.Methods[3].Timeout = 400 * time.Millisecond
	})}, s.Options(inventory)...)
	rt, err := runtime.NewClient(inventory, opts...)
	if err != nil {
		t.Fatal(err)
	}
	got := changesByKey(rt)
	if ch := got["methods.GetStock.timeout"]; ch.Annotated != "300ms" || ch.Value != "100ms" || !strings.HasSuffix(ch.Source, "methods.GetStock.timeout") {
		t.Errorf("GetStock's timeout: %+v, want 300ms → 100ms from the override", ch)
	}
	if ch := got["methods.StockReport.timeout"]; ch.Annotated != "300ms" || ch.Value != "400ms" || ch.Source != "edit" {
		t.Errorf("StockReport's timeout: %+v, want 300ms → 400ms from edit", ch)
	}
}

// A refusal's advice is true in an override file: removing an override
// gives back the annotated value, not the contract's default (inventory's
// cool-down is annotated 2s; the rule's words for a .proto, "remove it
// for the default 10s", would have the operator expect 10s).
func TestAttackSpineRefusalAdviceIsTrueForAnOverride(t *testing.T) {
	_, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    circuit_breaker: {cool_down: 0s, slow_call_threshold: 0s}
    methods:
      GetStock: {timeout: 0s, cache: {fresh_ttl: 2s, stale_ttl: 1s}}
`), nil, inventory)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.Contains(line, "for the default") || strings.Contains(line, "remove it for") || strings.Contains(line, "remove it to") {
			t.Errorf("advice that is false in an override: %s", line)
		}
		if !strings.Contains(line, "remove this override to keep the annotated value") {
			t.Errorf("no advice on what removing the override gives: %s", line)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d problems, want 4:\n%v", n, err)
	}
}

// The record and the comparison agree, and the later key is the source,
// where a variable and the file move the same values at two levels, and
// a service's retry adds one to a method the annotation gives none.
func TestAttackSpineRecordAgreesAcrossSources(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	file := `
services:
  example.inventory.v1.InventoryService:
    retry: {max_attempts: 2}
    circuit_breaker: {cool_down: 3s}
    methods:
      GetStock: {retry: {max_attempts: 4}, circuit_breaker: {per_method: true}}
`
	env := []string{svc + "METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS=5", svc + "CIRCUIT_BREAKER__COOL_DOWN=4s"}
	agree(t, file, env, 10)
	s, err := override.Parse("o.yaml", []byte(file), env, inventory)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	got := changesByKey(rt)
	for key, w := range map[string]runtime.Change{
		"methods.GetStock.retry.max_attempts":    {Value: "5", Source: svc + "METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS"},
		"methods.StockReport.retry.max_attempts": {Value: "2", Source: `o.yaml: ` + inv + `.retry.max_attempts`},
		"circuit_breaker.cool_down":              {Value: "4s", Source: svc + "CIRCUIT_BREAKER__COOL_DOWN"},
		// GetStock's own breaker is a copy of the shared one as the file
		// left it (3s); a service's value tunes the shared one only. It
		// was the annotation's 2s, which no source asked for: the
		// variable replaced the file's key for the same value, which then
		// applied after per_method.
		"methods.GetStock.circuit_breaker.cool_down": {Value: "3s", Source: `o.yaml: ` + inv + `.methods.GetStock.circuit_breaker.per_method`},
	} {
		if ch := got[key]; ch.Value != w.Value || ch.Source != w.Source {
			t.Errorf("%s: %+v, want %s from %s", key, ch, w.Value, w.Source)
		}
	}
	p := rt.Policy()
	if p.Methods[0].Breaker == nil || p.Methods[0].Breaker.CoolDown != 3*time.Second || p.Breaker.CoolDown != 4*time.Second {
		t.Errorf("in force: GetStock's breaker %+v, the shared %+v", p.Methods[0].Breaker, p.Breaker)
	}
}

// A bad value in the file is refused even when a variable sets the same
// value: every problem of the file and the variables is reported, and
// the plugin refuses the same value in a .proto.
func TestAttackSpineBadFileValueUnderAVariableIsRefused(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	s, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    circuit_breaker: {cool_down: -1s}
    methods:
      GetStock: {retry: {max_attempts: 0}}
`), []string{svc + "CIRCUIT_BREAKER__COOL_DOWN=4s", svc + "METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS=2"}, inventory)
	if err == nil {
		// As it was: the variable's key replaced the file's before the
		// rules ran, so the file's values were never checked.
		t.Fatalf("the file's circuit_breaker.cool_down: -1s and methods.GetStock.retry.max_attempts: 0 are accepted "+
			"under variables for the same values (Keys: %q)", s.Keys())
	}
	if testing.Verbose() {
		t.Log(err)
	}
	for _, key := range []string{inv + ".circuit_breaker.cool_down", inv + ".methods.GetStock.retry.max_attempts"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("the refusal does not name %s:\n%v", key, err)
		}
	}
}

// A bad variable over a good file value is refused at the variable, and
// the file's key is not blamed.
func TestAttackSpineBadVariableOverAGoodFileValue(t *testing.T) {
	const env = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS"
	_, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {retry: {max_attempts: 2}}
`), []string{env + "=0"}, inventory)
	if err == nil {
		t.Fatal("accepted")
	}
	if !strings.HasPrefix(err.Error(), env+": must be at least 1, got 0") || strings.Contains(err.Error(), "o.yaml") {
		t.Errorf("err = %v, want the variable named, and only it", err)
	}
}

// A retry added by an override to a service that sets no budget brings
// the default budget into force: the record lists it from that key, as
// the comparison does.
func TestAttackSpineRecordOfTheDefaultBudget(t *testing.T) {
	p := &policy.Service{Name: "pkg.S", Methods: []policy.Method{{Name: "/pkg.S/M", Idempotent: true, Timeout: time.Second}}}
	s, err := override.Parse("o.yaml", []byte(`
services:
  pkg.S:
    methods:
      M: {retry: {max_attempts: 2}}
`), nil, p)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := runtime.NewClient(p, s.Options(p)...)
	if err != nil {
		t.Fatal(err)
	}
	r, c := recordAndComparison(t, p, recorded)
	if len(r) != len(c) {
		t.Errorf("record %v\ncomparison %v", r, c)
	}
	for k, v := range c {
		if r[k] != v {
			t.Errorf("%s: record %+v, comparison %+v", k, r[k], v)
		}
	}
	if v := r["retry_budget.ratio"]; v.annotated != "none" || v.value != "0.1" {
		t.Errorf("the default budget: %+v in %v", v, r)
	}
}

// changesByKey is rt.Changes by the key of the value each moved.
func changesByKey(rt *runtime.Client) map[string]runtime.Change {
	got := map[string]runtime.Change{}
	for _, ch := range rt.Changes() {
		got[ch.Key] = ch
	}
	return got
}
