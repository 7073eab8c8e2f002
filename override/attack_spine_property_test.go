package override_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// One overridable value: its path under the service or a method, and
// values to try.
type knob struct {
	path   string
	values []any
}

var serviceKnobs = []knob{
	{"timeout", []any{"100ms", "500ms"}},
	{"overall_timeout", []any{"2s"}},
	{"retry_budget.ratio", []any{0.2}},
	{"retry_budget.min_retries", []any{0, 5}},
	{"circuit_breaker.cool_down", []any{"5s"}},
	{"circuit_breaker.window_calls", []any{30}},
	{"circuit_breaker.minimum_calls", []any{5}},
	{"circuit_breaker.slow_call_threshold", []any{"100ms"}},
	{"circuit_breaker.failure_codes", []any{[]string{"UNAVAILABLE"}}},
	{"bulkhead.permits", []any{16, 3}},
	{"bulkhead.max_wait", []any{"0s", "50ms"}},
	{"rate_limit.requests_per_second", []any{200, 1000.5}},
	{"rate_limit.burst", []any{7}},
	{"adaptive_limit.max_limit", []any{4}},
	{"adaptive_limit.tolerance", []any{2}},
	{"client_throttle.k", []any{3}},
	{"retry.max_attempts", []any{1, 2, 4}},
	{"retry.initial_backoff", []any{"10ms"}},
}

var methodKnobs = []knob{
	{"timeout", []any{"150ms"}},
	{"overall_timeout", []any{"1s"}},
	{"retry.max_attempts", []any{1, 2}},
	{"retry.max_backoff", []any{"400ms"}},
	{"circuit_breaker.per_method", []any{true, false}},
	{"circuit_breaker.cool_down", []any{"7s"}},
	{"bulkhead.per_method", []any{true, false}},
	{"bulkhead.permits", []any{2}},
	{"rate_limit.per_method", []any{true}},
	{"rate_limit.requests_per_second", []any{50}},
	{"cache.fresh_ttl", []any{"2s"}},
	{"cache.stale_ttl", []any{"10m"}},
	{"hedging.delay", []any{"20ms"}},
	{"hedging.max_copies", []any{3}},
	{"adaptive_limit.per_method", []any{true}},
	{"adaptive_limit.max_limit", []any{2}},
}

var knobMethods = []string{"GetStock", "ReserveStock", "WatchStock", "StockReport"}

// setPath sets a dotted path in nested maps.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// envValue writes v as a variable's value.
func envValue(v any) string {
	if l, ok := v.([]string); ok {
		return strings.Join(l, ",")
	}
	return fmt.Sprint(v)
}

// Random overrides, from the file and from variables, at the service and
// at methods, half of them after an edit that reorders the entries:
// whatever the loader accepts, the record Client.Changes shows
// is the comparison of the policy in force with the annotation, value by
// value, and every source is a key of the set.
func TestAttackSpineRecordIsTheTruthForRandomOverrides(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	seed := 11
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	accepted := 0
	for i := range 400 {
		file := map[string]any{}
		var env []string
		for range 1 + r.IntN(5) {
			method := ""
			k := serviceKnobs[r.IntN(len(serviceKnobs))]
			if r.IntN(2) == 0 {
				method = knobMethods[r.IntN(len(knobMethods))]
				k = methodKnobs[r.IntN(len(methodKnobs))]
			}
			v := k.values[r.IntN(len(k.values))]
			if r.IntN(3) == 0 {
				name := svc
				if method != "" {
					name += "METHODS__" + strings.ToUpper(method) + "__"
				}
				env = append(env, name+strings.ToUpper(strings.ReplaceAll(k.path, ".", "__"))+"="+envValue(v))
				continue
			}
			path := k.path
			if method != "" {
				path = "methods." + method + "." + path
			}
			setPath(file, path, v)
		}
		data, err := json.Marshal(map[string]any{"services": map[string]any{inventory.Name: file}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := override.Parse("o.yaml", data, env, inventory)
		if err != nil {
			continue
		}
		accepted++
		opts := s.Options(inventory)
		if i%2 == 1 { // the program reorders the entries first
			opts = append([]runtime.Option{runtime.WithPolicy(func(p *policy.Service) { slices.Reverse(p.Methods) })}, opts...)
		}
		recorded, err := runtime.NewClient(inventory, opts...)
		if err != nil {
			t.Errorf("case %d: the loader accepted what NewClient refuses: %v\nfile %s\nenv %q", i, err, data, env)
			continue
		}
		rec, cmp := recordAndComparison(t, inventory, recorded)
		bad := false
		for k, v := range cmp {
			if rec[k] != v {
				t.Errorf("case %d: %s: the record says %+v, the policy in force %+v", i, k, rec[k], v)
				bad = true
			}
		}
		for k, v := range rec {
			if _, ok := cmp[k]; !ok {
				t.Errorf("case %d: %s: recorded %+v, but the policy in force has it as annotated", i, k, v)
				bad = true
			}
		}
		keys := strings.Join(s.Keys(), "\n")
		for _, ch := range recorded.Changes() {
			if !strings.Contains(keys, ch.Source) {
				t.Errorf("case %d: %s from %q, none of the keys", i, ch.Key, ch.Source)
				bad = true
			}
		}
		if bad {
			t.Logf("case %d: file %s\nenv %q", i, data, env)
		}
	}
	if accepted < 50 {
		t.Errorf("only %d of 400 random sets accepted: the test checks little", accepted)
	}
	t.Logf("%d of 400 accepted", accepted)
}
