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
// the same core, it, the value it is about and the mend each in its
// reader's names, nothing else.
func TestProblemsOfTwoValuesSpeakEachBoundary(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		edit       func(m *policy.Method, p *policy.Service)
		// key is the override's key the loader blames, after the method.
		key                      string
		goSubject, optionSubject string
		// core is what is wrong, as the loader says it; goCore as
		// Validate does, in Go's names where it names another value
		// ("" for the same).
		core, goCore string
		goMend       string
		optionMend   string
	}{{
		name: "timeout as long as overall_timeout under an adaptive limit",
		yaml: "adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {overall_timeout: 300ms}",
		edit: func(m *policy.Method, p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: 2}
			m.OverallTimeout = m.Timeout
		},
		key:        "overall_timeout",
		core:       "GetStock's timeout 300ms is as long as its overall_timeout 300ms: ",
		goCore:     "GetStock's Timeout 300ms is as long as its OverallTimeout 300ms: ",
		goMend:     "; shorten Timeout below OverallTimeout or lengthen OverallTimeout, or remove the adaptive limit",
		optionMend: "; shorten timeout below overall_timeout or lengthen overall_timeout, or remove the adaptive limit",
	}, {
		name:       "timeout longer than overall_timeout",
		yaml:       "methods:\n      GetStock: {overall_timeout: 100ms}",
		edit:       func(m *policy.Method, p *policy.Service) { m.OverallTimeout = 100 * time.Millisecond },
		key:        "overall_timeout",
		goSubject:  "Timeout ",
		core:       "300ms is longer than overall_timeout 100ms: one attempt cannot outlast the whole call",
		goCore:     "300ms is longer than OverallTimeout 100ms: one attempt cannot outlast the whole call",
		goMend:     "; shorten Timeout or lengthen OverallTimeout",
		optionMend: "; shorten timeout or lengthen overall_timeout",
		// The loader blames overall_timeout, and says what of timeout.
		optionSubject: "timeout ",
	}, {
		name: "hedging beside retries",
		yaml: "methods:\n      GetStock: {hedging: {delay: 10ms}}",
		edit: func(m *policy.Method, p *policy.Service) {
			m.Hedging = &policy.Hedging{Delay: 10 * time.Millisecond, MaxCopies: 2}
		},
		key:        "hedging",
		core:       "GetStock also retries: a method hedges or retries, not both, since hedged copies already repeat the call",
		goMend:     "; remove one, or turn retries off for it with Retry.MaxAttempts 1",
		optionMend: "; remove one, or turn retries off for it with retry.max_attempts: 1",
	}, {
		name: "max_backoff below initial_backoff",
		yaml: "methods:\n      GetStock: {retry: {initial_backoff: 10s}}",
		edit: func(m *policy.Method, p *policy.Service) {
			r := *m.Retry
			r.InitialBackoff = 10 * time.Second
			m.Retry = &r
		},
		key:           "retry.initial_backoff",
		goSubject:     "MaxBackoff ",
		optionSubject: "max_backoff ",
		core:          "200ms is shorter than initial_backoff 10s: raise max_backoff or lower initial_backoff",
		goCore:        "200ms is shorter than InitialBackoff 10s: raise MaxBackoff or lower InitialBackoff",
	}, {
		name: "stale_ttl below fresh_ttl, merged",
		yaml: "methods:\n      GetStock: {cache: {fresh_ttl: 1h}}",
		edit: func(m *policy.Method, p *policy.Service) {
			c := *m.Cache
			c.FreshTTL = time.Hour
			m.Cache = &c
		},
		key:           "cache.fresh_ttl",
		goSubject:     "StaleTTL ",
		optionSubject: "stale_ttl ",
		core:          "5m0s is shorter than fresh_ttl 1h0m0s: an answer is stale only after it stopped being fresh",
		goCore:        "5m0s is shorter than FreshTTL 1h0m0s: an answer is stale only after it stopped being fresh",
		goMend:        "; raise StaleTTL, or set it to FreshTTL for no stale answers",
		optionMend:    "; raise stale_ttl, or set it to fresh_ttl for no stale answers",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := inventory.Clone()
			tc.edit(&p.Methods[0], &p)
			goCore := tc.core
			if tc.goCore != "" {
				goCore = tc.goCore
			}
			var goLine string
			for _, line := range strings.Split(p.Validate().Error(), "\n") {
				if strings.Contains(line, goCore) {
					goLine = line
				}
			}
			if !strings.Contains(goLine, ": "+tc.goSubject+goCore) || !strings.HasSuffix(goLine, tc.goMend) {
				t.Errorf("Validate said\n%s\nwant a line with %q, ending %q", p.Validate(), tc.goSubject+goCore, tc.goMend)
			}
			_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n    "+tc.yaml+"\n"), nil, inventory)
			want := `o.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.` + tc.key + ": "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.optionSubject+tc.core) || !strings.HasSuffix(err.Error(), tc.optionMend) || strings.Contains(err.Error(), "\n") {
				t.Errorf("the loader said\n%v\nwant one line starting %q, with %q, ending %q", err, want, tc.optionSubject+tc.core, tc.optionMend)
			}
		})
	}
}
