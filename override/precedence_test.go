package override_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
)

// The README's table of precedence, every cell: for each two sources that
// set WatchStock's timeout (annotated 60s on the method, 300ms on the
// service), the later in the table wins, and a service-level value also
// reaches the methods no method-level value names.
func TestPrecedenceOfEverySourcePair(t *testing.T) {
	type source struct {
		name  string
		value time.Duration
		file  string // a line under the service in the file
		env   string
	}
	const prefix = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	sources := []source{
		{name: "annotation", value: 60 * time.Second},
		{name: "file, service", value: 110 * time.Millisecond, file: "timeout: 110ms"},
		{name: "file, method", value: 120 * time.Millisecond, file: "methods: {WatchStock: {timeout: 120ms}}"},
		{name: "variable, service", value: 130 * time.Millisecond, env: prefix + "TIMEOUT=130ms"},
		{name: "variable, method", value: 140 * time.Millisecond, env: prefix + "METHODS__WATCHSTOCK__TIMEOUT=140ms"},
	}
	for i := range sources {
		for j := i + 1; j < len(sources); j++ {
			lo, hi := sources[i], sources[j]
			t.Run(lo.name+" < "+hi.name, func(t *testing.T) {
				var file []string
				var env []string
				for _, s := range []source{lo, hi} {
					if s.file != "" {
						file = append(file, "    "+s.file)
					}
					if s.env != "" {
						env = append(env, s.env)
					}
				}
				data := ""
				if len(file) > 0 {
					data = "services:\n  example.inventory.v1.InventoryService:\n" + strings.Join(file, "\n") + "\n"
				}
				s, err := override.Parse("o.yaml", []byte(data), env, inventory)
				if err != nil {
					t.Fatal(err)
				}
				rt := build(t, s)
				p := rt.Policy()
				if got := p.Methods[2].Timeout; got != hi.value {
					t.Errorf("WatchStock timeout %v, want %v from %s over %v from %s", got, hi.value, hi.name, lo.value, lo.name)
				}
				// GetStock sees only the service-level values, the later
				// one winning, else its annotated 300ms.
				want := 300 * time.Millisecond
				for _, s := range []source{lo, hi} {
					if strings.HasSuffix(s.name, "service") {
						want = s.value
					}
				}
				if got := p.Methods[0].Timeout; got != want {
					t.Errorf("GetStock timeout %v, want %v", got, want)
				}
				// The audit trail names the winner.
				found := false
				for _, ch := range rt.Changes() {
					if ch.Key == "methods.WatchStock.timeout" {
						found = true
						if ch.Value != hi.value.String() || !strings.Contains(ch.Source, sourceKey(hi)) {
							t.Errorf("change %+v, want %v from %s", ch, hi.value, sourceKey(hi))
						}
					}
				}
				if !found {
					t.Errorf("Changes() %+v has no change of methods.WatchStock.timeout", rt.Changes())
				}
			})
		}
	}
}

func sourceKey(s struct {
	name  string
	value time.Duration
	file  string
	env   string
}) string {
	if s.env != "" {
		name, _, _ := strings.Cut(s.env, "=")
		return name
	}
	if strings.HasPrefix(s.file, "methods") {
		return ".methods.WatchStock.timeout"
	}
	return fmt.Sprintf("%s.timeout", inv)
}

// Every problem of a file is reported at once: values wrong on their own,
// values wrong together, and values that do not apply, in one error.
func TestEveryKindOfProblemIsReportedAtOnce(t *testing.T) {
	_, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    circuit_breaker: {cooldown: 1s}
    methods:
      GetStock:
        retry: {max_attempts: 0}
        overall_timeout: 100ms
        cache: {fresh_ttl: 10m}
      ReserveStock:
        circuit_breaker: {window: 1s}
  example.payments.v1.PaymentsService:
    methods:
      Charge: {retry: {max_attempts: 2}}
`), []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__INITIAL_BACKOFF=500ms"}, inventory, payments)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		inv + ".circuit_breaker.cooldown: unknown field (did you mean cool_down?)",
		inv + ".methods.GetStock.retry.max_attempts: must be at least 1, got 0",
		inv + ".methods.GetStock.overall_timeout: in GetStock, timeout 300ms is longer than overall_timeout 100ms",
		inv + ".methods.GetStock.cache.fresh_ttl: in GetStock, stale_ttl 5m0s is shorter than fresh_ttl 10m0s",
		inv + ".methods.ReserveStock.circuit_breaker.window: the method has no circuit breaker of its own",
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__INITIAL_BACKOFF: in GetStock, max_backoff 200ms is shorter than initial_backoff 500ms",
		`services."example.payments.v1.PaymentsService".methods.Charge.retry: Charge is not idempotent`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nwant a line with %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 7 {
		t.Errorf("%d lines, want 7:\n%v", n, err)
	}
}
