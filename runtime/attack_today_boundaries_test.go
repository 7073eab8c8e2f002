package runtime_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// For every number of the adaptive limit and the client throttle set to
// an extreme (NaN, ±Inf, 0, negative, huge, min above max, initial
// outside), at the service and on a method, under no bulkhead, a bulkhead
// of one permit and one of many: policy.Service.Validate and
// runtime.NewClient agree (what one accepts the other builds, what one
// refuses the other refuses), neither panics, and Describe of a built
// client renders no invalid layer.
func TestAttackTodayAdaptiveBoundariesAgree(t *testing.T) {
	floats := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, 0.5, 1, 1.5, 1e308, math.SmallestNonzeroFloat64, 0.999999, 1.0000001}
	ints := []int{0, -1, 1, 2, 7, 1 << 20, math.MaxInt32, math.MaxInt64, math.MinInt64}
	durs := []time.Duration{0, -1, 1, 9, 10, time.Second, math.MaxInt64, math.MinInt64}
	type edit struct {
		name string
		f    func(a *policy.AdaptiveLimit)
	}
	var adaptiveEdits []edit
	for _, x := range floats {
		adaptiveEdits = append(adaptiveEdits,
			edit{fmt.Sprintf("Tolerance=%v", x), func(a *policy.AdaptiveLimit) { a.Tolerance = x }},
			edit{fmt.Sprintf("Smoothing=%v", x), func(a *policy.AdaptiveLimit) { a.Smoothing = x }})
	}
	for _, n := range ints {
		adaptiveEdits = append(adaptiveEdits,
			edit{fmt.Sprintf("MinLimit=%d", n), func(a *policy.AdaptiveLimit) { a.MinLimit = n }},
			edit{fmt.Sprintf("MaxLimit=%d", n), func(a *policy.AdaptiveLimit) { a.MaxLimit = n }},
			edit{fmt.Sprintf("InitialLimit=%d", n), func(a *policy.AdaptiveLimit) { a.InitialLimit = n }})
		for _, m := range []int{1, 2, 7, 1000} {
			adaptiveEdits = append(adaptiveEdits, edit{fmt.Sprintf("Min=%d,Max=%d,Initial=%d", m, n, (m+n)/2),
				func(a *policy.AdaptiveLimit) { a.MinLimit, a.MaxLimit, a.InitialLimit = m, n, (m+n)/2 }})
			adaptiveEdits = append(adaptiveEdits, edit{fmt.Sprintf("Min=%d,Initial=%d", m, n),
				func(a *policy.AdaptiveLimit) { a.MinLimit, a.InitialLimit = m, n }})
		}
	}
	for _, d := range durs {
		adaptiveEdits = append(adaptiveEdits, edit{fmt.Sprintf("BaselineWindow=%v", d), func(a *policy.AdaptiveLimit) { a.BaselineWindow = d }})
	}
	var throttleEdits []func(th *policy.Throttle) string
	for _, x := range floats {
		throttleEdits = append(throttleEdits,
			func(th *policy.Throttle) string { th.K = x; return fmt.Sprintf("K=%v", x) },
			func(th *policy.Throttle) string { th.MaxRefusal = x; return fmt.Sprintf("MaxRefusal=%v", x) })
	}
	for _, d := range durs {
		throttleEdits = append(throttleEdits, func(th *policy.Throttle) string { th.Window = d; return fmt.Sprintf("Window=%v", d) })
	}
	bulkheads := []*policy.Bulkhead{nil, {Permits: 1, MaxWait: 0}, {Permits: 3, MaxWait: time.Millisecond}, {Permits: 1 << 20}}

	try := func(name string, p *policy.Service) {
		t.Helper()
		verr := p.Validate()
		if (verr == nil) != (len(p.Problems()) == 0) {
			t.Errorf("%s: Validate %v but Problems %v", name, verr, p.Problems())
		}
		var c *runtime.Client
		var cerr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					cerr = fmt.Errorf("panicked: %v", r)
				}
			}()
			c, cerr = runtime.NewClient(p)
		}()
		switch {
		case verr == nil && cerr != nil:
			t.Errorf("%s: Validate accepts, NewClient refuses: %v", name, cerr)
		case verr != nil && cerr == nil:
			t.Errorf("%s: Validate refuses (%v), NewClient builds", name, verr)
		case c != nil:
			if d := c.Describe(); containsInvalid(d) {
				t.Errorf("%s: Describe of a built client shows an invalid layer:\n%s", name, d)
			}
		}
	}
	base := inventoryv1.InventoryServiceResilientPolicy.Clone()
	base.Methods[0].Timeout = 300 * time.Millisecond
	n := 0
	for _, bh := range bulkheads {
		for _, e := range adaptiveEdits {
			// At the service.
			p := base.Clone()
			p.Bulkhead = cloneBulkhead(bh)
			p.AdaptiveLimit = &policy.AdaptiveLimit{}
			e.f(p.AdaptiveLimit)
			try(fmt.Sprintf("service limit %s under %v", e.name, bh), &p)
			// On a method, under its own bulkhead or the service's.
			for _, own := range []bool{false, true} {
				p := base.Clone()
				p.Bulkhead = &policy.Bulkhead{Permits: 8, MaxWait: time.Millisecond}
				m := &p.Methods[0]
				if own {
					m.Bulkhead = cloneBulkhead(bh)
				} else {
					p.Bulkhead = cloneBulkhead(bh)
				}
				m.AdaptiveLimit = &policy.AdaptiveLimit{}
				e.f(m.AdaptiveLimit)
				try(fmt.Sprintf("method limit %s under %v (own bulkhead %v)", e.name, bh, own), &p)
			}
			n += 3
		}
	}
	for _, e := range throttleEdits {
		p := base.Clone()
		p.ClientThrottle = &policy.Throttle{}
		name := e(p.ClientThrottle)
		try("throttle "+name, &p)
		n++
	}
	t.Logf("%d policies tried", n)
}

func cloneBulkhead(b *policy.Bulkhead) *policy.Bulkhead {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

func containsInvalid(s string) bool {
	for i := 0; i+len("invalid") <= len(s); i++ {
		if s[i:i+len("invalid")] == "invalid" {
			return true
		}
	}
	return false
}
