package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestProblemsOfTwoValuesSpeakEachBoundary: the runtime's check mends a
// Go policy in its Go field names, and the loader reports the same
// problem, made by an override, in the options' names an operator writes:
// the core alike, the mend renamed, nothing else.
func TestProblemsOfTwoValuesSpeakEachBoundary(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		edit       func(m *policy.Method, p *policy.Service)
		core       string
		goMend     string
		optionMend string
	}{{
		name: "timeout as long as overall_timeout under an adaptive limit",
		yaml: "adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {overall_timeout: 300ms}",
		edit: func(m *policy.Method, p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: 2}
			m.OverallTimeout = m.Timeout
		},
		core:       "GetStock's timeout 300ms is as long as its overall_timeout 300ms: ",
		goMend:     "; shorten Timeout below OverallTimeout or lengthen OverallTimeout, or remove the adaptive limit",
		optionMend: "; shorten timeout below overall_timeout or lengthen overall_timeout, or remove the adaptive limit",
	}, {
		name:       "timeout longer than overall_timeout",
		yaml:       "methods:\n      GetStock: {overall_timeout: 100ms}",
		edit:       func(m *policy.Method, p *policy.Service) { m.OverallTimeout = 100 * time.Millisecond },
		core:       "timeout 300ms is longer than overall_timeout 100ms: one attempt cannot outlast the whole call",
		goMend:     "; shorten Timeout or lengthen OverallTimeout",
		optionMend: "; shorten timeout or lengthen overall_timeout",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := inventory.Clone()
			tc.edit(&p.Methods[0], &p)
			var goLine string
			for _, line := range strings.Split(p.Validate().Error(), "\n") {
				if strings.Contains(line, tc.core) {
					goLine = line
				}
			}
			if !strings.HasSuffix(goLine, tc.goMend) {
				t.Errorf("Validate said\n%s\nwant a line with %q ending %q", p.Validate(), tc.core, tc.goMend)
			}
			_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n    "+tc.yaml+"\n"), nil, inventory)
			want := `o.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.overall_timeout: `
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.core) || !strings.HasSuffix(err.Error(), tc.optionMend) {
				t.Errorf("the loader said\n%v\nwant one line starting %q, with %q, ending %q", err, want, tc.core, tc.optionMend)
			}
		})
	}
}
