// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"cmp"
	"fmt"
	"time"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/internal/throttle"
)

// AdaptiveLimit configures an adaptive concurrency limit: the attempts
// towards the dependency let be in flight at once follow its latency (a
// gradient against a low percentile of the round-trip times of the last
// BaselineWindow, halving once per round trip on a timeout or an overload
// refusal), and an attempt above the limit is refused at once with
// runtime.ErrConcurrencyLimited. A zero field takes its value from
// DefaultAdaptiveLimit. Under a bulkhead the bulkhead's permits are the
// ceiling: MaxLimit, its default included, is at most Permits.
type AdaptiveLimit struct {
	// MinLimit is the lowest the limit falls: the attempts let through
	// while the dependency is at its worst. At least 1.
	MinLimit int
	// MaxLimit is the highest the limit grows, at most 2^20 and at least
	// MinLimit; under a bulkhead, at most its permits (0: the permits).
	MaxLimit int
	// InitialLimit is the limit before any attempt has come back, in
	// [MinLimit, MaxLimit].
	InitialLimit int
	// Tolerance is how many times slower than the baseline a round may be
	// before the limit shrinks; at least 1.
	Tolerance float64
	// Smoothing is the share of each latency-driven change applied per
	// round, in (0, 1]. Drops are not smoothed.
	Smoothing float64
	// BaselineWindow is how long round RTTs count towards the
	// dependency's unloaded latency, the baseline; at least 10 ns.
	BaselineWindow time.Duration
}

// DefaultAdaptiveLimit holds the values a zero field of an
// AdaptiveLimit stands for: MinLimit 1, MaxLimit 100, InitialLimit 20,
// Tolerance 1.5, Smoothing 0.5, BaselineWindow 30 s.
var DefaultAdaptiveLimit = AdaptiveLimit(adaptive.Defaults)

// Throttle configures adaptive client-side throttling (the Google SRE
// book's): each attempt is refused locally, with runtime.ErrThrottled,
// with probability max(0, (requests − K × accepts) / (requests + 1)) over
// the last Window, capped at MaxRefusal. A zero field takes its value from
// DefaultThrottle.
type Throttle struct {
	// K is how many requests per accept the dependency may refuse before
	// any is refused locally; at least 1.
	K float64
	// Window is the sliding window over which requests and accepts are
	// counted, in 10 buckets; at least 10 ns.
	Window time.Duration
	// MaxRefusal caps the probability of a local refusal, in (0, 1), so
	// that some attempts always reach the dependency and see it recover.
	MaxRefusal float64
}

// DefaultThrottle holds the values a zero field of a Throttle stands
// for: K 2, Window 5 s, MaxRefusal 0.9.
var DefaultThrottle = Throttle(throttle.Defaults)

// checkAdaptive checks an adaptive limit p of the service (f
// "AdaptiveLimit") or of a method (f its field), given the bulkhead b the
// limit sits under (nil for none): each value that is set on its own,
// then, if they are right, the bounds under the bulkhead's permits and in
// order, defaults included. A zero field is its default and fine.
func checkAdaptive(f string, p *AdaptiveLimit, b *Bulkhead, r *reporter) {
	if p == nil {
		return
	}
	d := DefaultAdaptiveLimit
	problems := 0
	// set checks a value that is set (not zero, or written), reporting
	// problem followed by hint, for every boundary, and by how to get
	// def, the value's default: leaving it 0 in Go, out in the options.
	set := func(field string, notZero bool, problem, hint string, def any) {
		if r.given(notZero) && problem != "" {
			unset := words(fmt.Sprintf("for the default %v", def))
			if s, ok := def.(words); ok {
				unset = s
			}
			r.report(f+"."+field, "", text(problem+hint), "; leave it 0 "+unset, unset, false)
			problems++
		}
	}
	set("MinLimit", p.MinLimit != 0, check.AtLeastOne(int64(p.MinLimit)), "; at least one attempt must reach the dependency to see it recover", d.MinLimit)
	set("MaxLimit", p.MaxLimit != 0, check.AdaptiveMaxLimit(int64(p.MaxLimit)), "", maxLimitUnset(b, r.written))
	set("InitialLimit", p.InitialLimit != 0, check.AtLeastOne(int64(p.InitialLimit)), "", initialLimitUnset)
	set("Tolerance", p.Tolerance != 0, check.Tolerance(p.Tolerance), "", d.Tolerance)
	set("Smoothing", p.Smoothing != 0, check.Ratio(p.Smoothing), "", d.Smoothing)
	set("BaselineWindow", p.BaselineWindow != 0, check.AdaptiveWindow(p.BaselineWindow), "", d.BaselineWindow)
	if problems > 0 {
		return // the bounds' order means nothing while one is wrong
	}
	q := adaptive.Policy(*p)
	if b != nil && b.Permits > 0 {
		for _, l := range []struct {
			field string
			v     int
			fix   words
		}{{"MinLimit", q.MinLimit, ""}, {"MaxLimit", q.MaxLimit, ", or leave it unset for the ceiling"}, {"InitialLimit", q.InitialLimit, ""}} {
			if msg := check.AboveCeiling(int64(l.v), int64(b.Permits), ""); msg != "" {
				r.pair(f+"."+l.field, "", []string{"Bulkhead.Permits"}, text(msg), l.fix)
				return
			}
		}
		q = q.WithCeiling(b.Permits)
	}
	// The values in force; a default initial limit is kept between them.
	lo, hi, from := cmp.Or(q.MinLimit, d.MinLimit), cmp.Or(q.MaxLimit, d.MaxLimit), ""
	if p.MaxLimit == 0 {
		// Under a bulkhead the default is the lower of 100 and the permits,
		// which MinLimit fits under: only the default 100 can be too low.
		from = " (the default)"
	}
	if msg := check.MinAboveMax(int64(lo), int64(hi), from); msg != "" {
		r.pair(f+".MinLimit", "{MinLimit}", []string{f + ".MaxLimit"}, msg, "")
		return
	}
	if p.InitialLimit != 0 {
		// No mend in Go's terms: the override loader reports this one to
		// the author of a file, who cannot write 0. It relates the bound
		// it crosses: a high one is never the bulkhead's, which the
		// initial limit fits under already.
		bound := f + ".MinLimit"
		if p.InitialLimit > lo {
			bound = f + ".MaxLimit"
		}
		r.pair(f+".InitialLimit", "{InitialLimit}", []string{bound}, check.InitialOutside(int64(p.InitialLimit), int64(lo), int64(hi)), "")
	}
}

// initialLimitUnset is what leaving an adaptive limit's InitialLimit out
// stands for, after "use 0" or "remove it": the default is held between
// the bounds in force, so it is not always 20.
var initialLimitUnset = words(fmt.Sprintf("for the default %d (or the nearer of {MinLimit} and {MaxLimit} when %[1]d is outside them)", DefaultAdaptiveLimit.InitialLimit))

// maxLimitUnset is what leaving an adaptive limit's MaxLimit out stands
// for under the bulkhead b (nil for none), after "use 0" or "remove it":
// the default 100, or the bulkhead's permits when fewer (the ceiling,
// rules.Followed). written says b is not known (GroupProblems, the options
// boundaries that check a level on its own), so both are named.
func maxLimitUnset(b *Bulkhead, written bool) words {
	def := DefaultAdaptiveLimit.MaxLimit
	switch {
	case written:
		return words(fmt.Sprintf("for the default %d, or the bulkhead's permits if fewer", def))
	case b != nil && b.Permits > 0 && b.Permits < def:
		return words(fmt.Sprintf("for the default, the bulkhead's %d permits", b.Permits))
	}
	return words(fmt.Sprintf("for the default %d", def))
}

// checkThrottle checks the values of a client-side throttler that are
// set; a zero field is its default and fine.
func checkThrottle(f string, p *Throttle, r *reporter) {
	if p == nil {
		return
	}
	d := DefaultThrottle
	if r.given(p.K != 0) {
		r.fail(f+".K", check.ThrottleK(p.K), words(fmt.Sprintf("; leave it 0 for the default %v", d.K)))
	}
	if r.given(p.Window != 0) {
		r.fail(f+".Window", check.AdaptiveWindow(p.Window), words(fmt.Sprintf("; leave it 0 for the default %v", d.Window)))
	}
	if r.given(p.MaxRefusal != 0) {
		r.fail(f+".MaxRefusal", check.MaxRefusal(p.MaxRefusal), words(fmt.Sprintf("; leave it 0 for the default %v", d.MaxRefusal)))
	}
}

// checkAdaptive checks the method's own adaptive limit, under its bulkhead
// or the service's.
func (m *Method) checkAdaptive(f string, p *Service, r *reporter) {
	if m.AdaptiveLimit == nil {
		return
	}
	if m.Kind != KindUnary {
		r.pair(f+".AdaptiveLimit", "", nil, text("streams take no adaptive token: a stream's lifetime says nothing of the dependency's latency; remove it"), "")
		return
	}
	b := m.Bulkhead
	if b == nil {
		b = p.Bulkhead
	}
	checkAdaptive(f+".AdaptiveLimit", m.AdaptiveLimit, b, r)
}
