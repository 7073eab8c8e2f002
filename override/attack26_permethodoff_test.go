package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestPerMethodOffNeverLeavesAMethodWithout: "An override sets values; it
// does not take one away" (Overrides). per_method: false gives a method
// the service's shared breaker or bulkhead back; where the service shares
// none, it would leave the method with neither, and is refused naming
// the method (attack26d: before, it was accepted and the method ran with
// no breaker and no bulkhead).
func TestPerMethodOffNeverLeavesAMethodWithout(t *testing.T) {
	p := inventory.Clone()
	if p.Breaker == nil || p.Bulkhead == nil {
		t.Fatal("the example shares a breaker and a bulkhead: the test moves them onto a method")
	}
	m := &p.Methods[0]
	short := m.Name[strings.LastIndex(m.Name, "/")+1:]
	br, bh := *p.Breaker, *p.Bulkhead
	m.Breaker, m.Bulkhead = &br, &bh
	p.Breaker, p.Bulkhead = nil, nil
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"circuit_breaker", "bulkhead"} {
		body := "services:\n  " + p.Name + ":\n    methods:\n      " + short + ": {" + group + ": {per_method: false}}\n"
		_, err := override.Parse("o.yaml", []byte(body), nil, &p)
		if err == nil || !strings.Contains(err.Error(), "per_method: false would leave "+short+" with none") {
			t.Errorf("%s.per_method: false on %s, whose service shares none: got %v, want a refusal naming the method", group, short, err)
		}
	}
	// With a shared one it is the documented way back to it.
	q := inventory.Clone()
	qm := &q.Methods[0]
	qm.Bulkhead = &policy.Bulkhead{Permits: 2}
	body := "services:\n  " + q.Name + ":\n    methods:\n      " + qm.Name[strings.LastIndex(qm.Name, "/")+1:] + ": {bulkhead: {per_method: false}}\n"
	if _, err := override.Parse("o.yaml", []byte(body), nil, &q); err != nil {
		t.Errorf("per_method: false with a shared bulkhead: %v", err)
	}
}
