package runtime

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// Problems names each field as the options do, so that the override
// loader can report it at its key.
func TestProblemsNameTheOptionKey(t *testing.T) {
	p := validPolicy()
	p.Breaker.CoolDown = 0
	p.Budget.Ratio = 2
	p.Methods[0].Retry.MaxBackoff = time.Millisecond
	p.Methods[0].Retry.Multiplier = 0.5
	p.Methods[0].Timeout = 2 * time.Second
	p.Methods[1].Bulkhead.MaxWait = -1
	p.Methods[0].Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Millisecond, MaxEntries: 1}
	type key struct{ method, key string }
	var got []key
	for _, pr := range p.Problems() {
		got = append(got, key{pr.Method, pr.Key})
	}
	want := []key{
		{"", "retry_budget.ratio"},
		{"", "circuit_breaker.cool_down"},
		{"GetItem", "timeout"},
		{"GetItem", "retry.max_backoff"},
		{"GetItem", "retry.backoff_multiplier"},
		{"GetItem", "cache.stale_ttl"},
		{"Reserve", "bulkhead.max_wait"},
	}
	if len(got) != len(want) {
		t.Fatalf("problems %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d names %+v, want %+v", i, got[i], want[i])
		}
	}
	if (&policy.Service{Name: "a.B"}).Problems() != nil {
		t.Error("problems in a valid policy")
	}
}
