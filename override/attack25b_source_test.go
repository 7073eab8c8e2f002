package override_test

import (
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25bSameValueLaterKeyIsTheSource: "a later key over the same
// value takes its place (Source is the key whose value is in force)". A
// later key that writes the value an earlier one left is the one in
// force by the table of precedence: removing the earlier key changes
// nothing, changing the later one changes the value. Before, the record
// listed only what a key moved, so a variable (rank 5) that set again
// the file's value (rank 3), or a method's key (rank 3) that set again
// its service's (rank 2), left the earlier key as the source, and
// Describe sent the operator to the key whose edit changes nothing.
func TestAttack25bSameValueLaterKeyIsTheSource(t *testing.T) {
	const (
		getEnv   = invEnv + "__METHODS__GETSTOCK__TIMEOUT"
		svcEnv   = invEnv + "__CIRCUIT_BREAKER__COOL_DOWN"
		svcKey   = `o.yaml: ` + inv + `.timeout`
		getKey   = `o.yaml: ` + inv + `.methods.GetStock.timeout`
		coolKey  = `o.yaml: ` + inv + `.circuit_breaker.cool_down`
		retryKey = `o.yaml: ` + inv + `.methods.GetStock.retry.max_attempts`
	)
	for _, tc := range []struct {
		name  string
		file  string
		env   []string
		edits []runtime.Option // before the overrides
		want  map[string]runtime.Change
	}{{
		name: "a variable sets the file's value again",
		file: svcYAML("    methods:\n      GetStock: {timeout: 150ms}\n"),
		env:  []string{getEnv + "=150ms"},
		want: map[string]runtime.Change{"methods.GetStock.timeout": {Annotated: "300ms", Value: "150ms", Source: getEnv}},
	}, {
		name: "a method's key sets its service's value again",
		file: svcYAML("    timeout: 150ms\n    methods:\n      GetStock: {timeout: 150ms}\n"),
		want: map[string]runtime.Change{
			"methods.GetStock.timeout":    {Annotated: "300ms", Value: "150ms", Source: getKey},
			"methods.StockReport.timeout": {Annotated: "300ms", Value: "150ms", Source: svcKey},
		},
	}, {
		name: "a service's variable sets the shared breaker's value again",
		file: svcYAML("    circuit_breaker: {cool_down: 5s}\n"),
		env:  []string{svcEnv + "=5s"},
		want: map[string]runtime.Change{"circuit_breaker.cool_down": {Annotated: "2s", Value: "5s", Source: svcEnv}},
	}, {
		name:  "an override sets a program's edit again",
		file:  svcYAML("    methods:\n      GetStock: {retry: {max_attempts: 2}}\n"),
		edits: []runtime.Option{runtime.WithPolicyFrom("the program", func(p *policy.Service) { p.Methods[0].Retry.MaxAttempts = 2 })},
		want:  map[string]runtime.Change{"methods.GetStock.retry.max_attempts": {Annotated: "3", Value: "2", Source: retryKey}},
	}, {
		// The same value again must not list what it did not write: a
		// service's cool_down tunes the shared breaker, not a method's
		// own copy that happens to hold the same value.
		name: "a service's key does not claim a method's own group",
		file: svcYAML("    circuit_breaker: {cool_down: 5s}\n    methods:\n      GetStock: {circuit_breaker: {per_method: true}}\n"),
		env:  []string{svcEnv + "=5s"},
		want: map[string]runtime.Change{
			"circuit_breaker.cool_down":                  {Annotated: "2s", Value: "5s", Source: svcEnv},
			"methods.GetStock.circuit_breaker.cool_down": {Annotated: "none", Value: "5s", Source: `o.yaml: ` + inv + `.methods.GetStock.circuit_breaker.per_method`},
		},
	}, {
		// Set back to the annotation's value: still no change listed.
		name: "a variable sets the annotated value back",
		file: svcYAML("    methods:\n      GetStock: {timeout: 150ms}\n"),
		env:  []string{getEnv + "=300ms"},
		want: map[string]runtime.Change{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("o.yaml", []byte(tc.file), tc.env, inventory)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := runtime.NewClient(inventory, append(tc.edits, s.Options(inventory)...)...)
			if err != nil {
				t.Fatal(err)
			}
			got := changesByKey(rt)
			for key, w := range tc.want {
				w.Key = key
				if got[key] != w {
					t.Errorf("%s: %+v\nwant %+v", key, got[key], w)
				}
			}
			if len(tc.want) == 0 && len(got) != 0 {
				t.Errorf("changes %+v, want none", rt.Changes())
			}
		})
	}
}
