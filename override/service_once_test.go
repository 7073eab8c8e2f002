package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestServiceValueWrongForManyMethodsIsOneProblem: an override of the
// service that the runtime's check refuses in the same words for several
// methods is reported once, at its key, naming the methods (all of them:
// "each method"); in other words for another method, once more. An
// override of one method still names that method alone.
func TestServiceValueWrongForManyMethodsIsOneProblem(t *testing.T) {
	twoMethods := &policy.Service{Name: "t.S", Methods: []policy.Method{
		{Name: "/t.S/A", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second},
		{Name: "/t.S/B", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second},
	}}
	for _, tc := range []struct {
		name, file string
		want       []string // every line of the error, in order
	}{
		{"a service's backoff, for the methods that retry",
			`{services: {example.inventory.v1.InventoryService: {retry: {max_backoff: 1ms}}}}`,
			[]string{`o.yaml: ` + inv + `.retry.max_backoff: in GetStock, ReserveStock and StockReport, max_backoff 1ms is shorter than initial_backoff 50ms: raise max_backoff or lower initial_backoff`}},
		{"a service's overall timeout, in the words of each timeout",
			`{services: {example.inventory.v1.InventoryService: {overall_timeout: 1ms}}}`,
			[]string{
				`o.yaml: ` + inv + `.overall_timeout: in GetStock, ReserveStock and StockReport, timeout 300ms is longer than overall_timeout 1ms: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout`,
				`o.yaml: ` + inv + `.overall_timeout: in WatchStock, timeout 1m0s is longer than overall_timeout 1ms: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout`,
			}},
		{"every method",
			`{services: {t.S: {overall_timeout: 1ms}}}`,
			[]string{`o.yaml: services."t.S".overall_timeout: in each method, timeout 1s is longer than overall_timeout 1ms: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout`}},
		{"one method's override",
			`{services: {t.S: {methods: {B: {overall_timeout: 1ms}}}}}`,
			[]string{`o.yaml: services."t.S".methods.B.overall_timeout: in B, timeout 1s is longer than overall_timeout 1ms: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := override.Parse("o.yaml", []byte(tc.file), nil, inventory, twoMethods)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}
