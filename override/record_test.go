package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// recordFile touches every kind of value an override can move: a
// service's value applied to each method and one method's over it, the
// shared groups, a group added, a method's own group given and taken
// away, retries turned off, and a variable over the file.
const recordFile = `
services:
  example.inventory.v1.InventoryService:
    timeout: 250ms
    retry_budget: {ratio: 0.2}
    circuit_breaker: {cool_down: 5s, failure_codes: [UNAVAILABLE]}
    bulkhead: {permits: 16}
    rate_limit: {requests_per_second: 1000}
    methods:
      GetStock:
        timeout: 100ms
        retry: {max_attempts: 1}
        cache: {fresh_ttl: 2s}
      WatchStock: {bulkhead: {per_method: false}}
      StockReport:
        bulkhead: {per_method: true, permits: 2}
        retry: {max_attempts: 2}
`

var recordEnv = []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__CACHE__MAX_ENTRIES=500"}

// Changes and Describe list what override applied, each value with the
// key that moved it, as written.
func TestChangesAreTheRecordOfEachKey(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(recordFile), recordEnv, inventory)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	file := "o.yaml: " + inv
	want := map[string]runtime.Change{
		"methods.GetStock.timeout":              {Annotated: "300ms", Value: "100ms", Source: file + ".methods.GetStock.timeout"},
		"methods.ReserveStock.timeout":          {Annotated: "300ms", Value: "250ms", Source: file + ".timeout"},
		"methods.WatchStock.timeout":            {Annotated: "1m0s", Value: "250ms", Source: file + ".timeout"},
		"methods.StockReport.timeout":           {Annotated: "300ms", Value: "250ms", Source: file + ".timeout"},
		"retry_budget.ratio":                    {Annotated: "0.1", Value: "0.2", Source: file + ".retry_budget.ratio"},
		"circuit_breaker.cool_down":             {Annotated: "2s", Value: "5s", Source: file + ".circuit_breaker.cool_down"},
		"circuit_breaker.failure_codes":         {Annotated: fmtCodes(inventory.Breaker.FailureCodes), Value: fmtCodes(policy.CodesOf(14)), Source: file + ".circuit_breaker.failure_codes"},
		"bulkhead.permits":                      {Annotated: "8", Value: "16", Source: file + ".bulkhead.permits"},
		"rate_limit.requests_per_second":        {Annotated: "500", Value: "1000", Source: file + ".rate_limit.requests_per_second"},
		"methods.GetStock.retry.max_attempts":   {Annotated: "3", Value: "1", Source: file + ".methods.GetStock.retry.max_attempts"},
		"methods.GetStock.cache.fresh_ttl":      {Annotated: "1s", Value: "2s", Source: file + ".methods.GetStock.cache.fresh_ttl"},
		"methods.GetStock.cache.max_entries":    {Annotated: "10000", Value: "500", Source: recordEnv[0][:strings.IndexByte(recordEnv[0], '=')]},
		"methods.WatchStock.bulkhead.permits":   {Annotated: "4", Value: "none", Source: file + ".methods.WatchStock.bulkhead.per_method"},
		"methods.WatchStock.bulkhead.max_wait":  {Annotated: "20ms", Value: "none", Source: file + ".methods.WatchStock.bulkhead.per_method"},
		"methods.StockReport.bulkhead.permits":  {Annotated: "none", Value: "2", Source: file + ".methods.StockReport.bulkhead.permits"},
		"methods.StockReport.bulkhead.max_wait": {Annotated: "none", Value: "20ms", Source: file + ".methods.StockReport.bulkhead.per_method"},
		// A retry the annotation has not: max_attempts, and the defaults
		// that came with it.
		"methods.StockReport.retry.max_attempts":    {Annotated: "none", Value: "2", Source: file + ".methods.StockReport.retry.max_attempts"},
		"methods.StockReport.retry.initial_backoff": {Annotated: "none", Value: "50ms", Source: file + ".methods.StockReport.retry.max_attempts"},
	}
	got := map[string]runtime.Change{}
	for _, ch := range rt.Changes() {
		k := ch.Key
		ch.Key = ""
		if _, dup := got[k]; dup {
			t.Errorf("%s listed twice in %+v", k, rt.Changes())
		}
		got[k] = ch
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("change of %s = %+v, want %+v", k, got[k], w)
		}
	}
	keys := strings.Join(s.Keys(), "\n")
	out := rt.Describe()
	for k, ch := range got {
		if !strings.Contains(keys, ch.Source) {
			t.Errorf("change of %s from %q, which is none of the keys:\n%s", k, ch.Source, keys)
		}
		if line := k + ": " + ch.Annotated + " → " + ch.Value + " (" + ch.Source + ")"; !strings.Contains(out, line) {
			t.Errorf("Describe():\n%s\nhas no line %q", out, line)
		}
	}
	if !strings.Contains(out, "/GetStock\n    unary, idempotent: true, idempotency_key: none, timeout: 100ms, overall_timeout: none, priority: normal\n    retry: none (max_attempts 1)\n") {
		t.Errorf("Describe():\n%s\nwant GetStock's retry shown as none", out)
	}
}

// The record override keeps and the comparison a plain edit falls back
// to agree on every value: the same policy reached by WithPolicy lists
// the same changes, from "WithPolicy".
func TestRecordAgreesWithTheComparison(t *testing.T) {
	agree(t, recordFile, recordEnv, 18)
	agree(t, `
services:
  example.inventory.v1.InventoryService:
    adaptive_limit: {max_limit: 8}
    client_throttle: {k: 3}
    methods:
      GetStock: {adaptive_limit: {per_method: true, tolerance: 2}}
`, nil, 3)
}

func agree(t *testing.T, file string, env []string, least int) {
	t.Helper()
	s, err := override.Parse("o.yaml", []byte(file), env, inventory)
	if err != nil {
		t.Fatal(err)
	}
	recorded := build(t, s)
	r, c := recordAndComparison(t, inventory, recorded)
	for k, v := range c {
		if r[k] != v {
			t.Errorf("%s: record %+v, comparison %+v", k, r[k], v)
		}
	}
	for k, v := range r {
		if _, ok := c[k]; !ok {
			t.Errorf("%s: in the record (%+v), not in the comparison", k, v)
		}
	}
	if len(r) < least {
		t.Errorf("only %d changes recorded: %+v", len(r), recorded.Changes())
	}
}

func fmtCodes(c policy.CodeSet) string { return c.String() }

// change is one value of Client.Changes, without its source.
type change struct{ annotated, value string }

// recordAndComparison lists by key the changes of recorded, whose trail is
// the loader's record (WithRecordedPolicy), and those of a client built
// from the same annotated policy p with recorded's policy in force set by
// a plain edit, whose trail is the runtime's comparison of the two.
func recordAndComparison(t *testing.T, p *policy.Service, recorded *runtime.Client) (rec, cmp map[string]change) {
	t.Helper()
	applied := recorded.Policy().Clone()
	compared, err := runtime.NewClient(p, runtime.WithPolicy(func(q *policy.Service) { *q = applied.Clone() }))
	if err != nil {
		t.Fatal(err)
	}
	rec, cmp = map[string]change{}, map[string]change{}
	for _, ch := range recorded.Changes() {
		rec[ch.Key] = change{ch.Annotated, ch.Value}
	}
	for _, ch := range compared.Changes() {
		cmp[ch.Key] = change{ch.Annotated, ch.Value}
		if ch.Source != "WithPolicy" {
			t.Errorf("%s from %q, want WithPolicy", ch.Key, ch.Source)
		}
	}
	return rec, cmp
}
