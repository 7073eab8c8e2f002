// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/contract"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// RuleAdaptive: an adaptive_limit whose bounds do not fit together or
// under the bulkhead's permits, one on a stream or on a method without a
// per-attempt timeout shorter than its overall_timeout; a count-based
// breaker window smaller than its minimum_calls.
const RuleAdaptive = "RESILIENT_ADAPTIVE"

// CheckAdaptive checks the adaptive layers once the levels are merged: the
// limit's bounds together and under the bulkhead's permits (its ceiling),
// the count window against minimum_calls, and, on a unary method, that a
// limit has a per-attempt timeout to halve on, shorter than the method's
// overall_timeout (else the call's limit cuts every attempt first). m and own are nil for the
// service's shared settings; a method's bounds and window are checked
// where it has its own limit or breaker, the shared ones on the service.
func CheckAdaptive(m protoreflect.MethodDescriptor, own *resilientv1.Policy, eff Merged, add func(Finding)) {
	p := eff.Policy
	if cb := p.GetCircuitBreaker(); cb != nil && cb.WindowCalls != nil && (m == nil || own.GetCircuitBreaker().GetPerMethod()) {
		minimum := defaults().GetCircuitBreaker().GetMinimumCalls()
		if cb.MinimumCalls != nil {
			minimum = cb.GetMinimumCalls()
		}
		lvl := eff.SetBy["circuit_breaker.window_calls"]
		// A time window written below the level of the count window
		// would be ignored without a word: the lower level cannot take
		// window_calls away (0 is refused), so it is refused there.
		if at, ok := eff.SetBy["circuit_breaker.window"]; ok && at > lvl {
			add(Finding{RuleAdaptive, at, "circuit_breaker.window", fmt.Sprintf("would be ignored: window_calls, set in %s, makes the breaker count over the last calls; remove window here, or move window_calls to the services and methods that count calls", lvl.Option())})
		}
		if msg := check.WindowBelowMinimum(int64(cb.GetWindowCalls()), int64(minimum), eff.Origin("circuit_breaker.minimum_calls", lvl)).Options(); msg != "" {
			add(Finding{RuleAdaptive, lvl, "circuit_breaker.window_calls", msg + "; raise window_calls or lower minimum_calls"})
		}
	}
	a := p.GetAdaptiveLimit()
	if a == nil {
		return
	}
	if m != nil {
		if m.IsStreamingClient() || m.IsStreamingServer() {
			return // a stream takes no part; CheckOwnAdaptive refuses its own limit
		}
		if msg := check.AdaptiveTimeout(string(m.Name()), p.GetTimeout().AsDuration()).Options(); msg != "" {
			add(Finding{RuleAdaptive, eff.SetBy["adaptive_limit"], "adaptive_limit", msg + "; set timeout on the method, the service or the file"})
		}
		if msg := check.AdaptiveOverall(string(m.Name()), p.GetTimeout().AsDuration(), p.GetOverallTimeout().AsDuration()).Options(); msg != "" {
			add(Finding{RuleAdaptive, eff.SetBy["adaptive_limit"], "adaptive_limit", msg + "; shorten timeout below overall_timeout, or lengthen overall_timeout"})
		}
		if !own.GetAdaptiveLimit().GetPerMethod() {
			return // the shared limit's bounds are the service's
		}
	}
	limit := func(v *uint32, def uint32) uint32 {
		if v != nil {
			return *v
		}
		return def
	}
	lo := limit(a.MinLimit, defaults().GetAdaptiveLimit().GetMinLimit())
	hi := limit(a.MaxLimit, contract.AdaptiveMaxLimit)
	if bh := p.GetBulkhead(); bh != nil && bh.Permits != nil && bh.GetPermits() > 0 {
		permits := bh.GetPermits()
		for _, f := range []struct {
			name string
			v    *uint32
		}{{"min_limit", a.MinLimit}, {"max_limit", a.MaxLimit}, {"initial_limit", a.InitialLimit}} {
			if f.v == nil {
				continue
			}
			lvl := eff.SetBy["adaptive_limit."+f.name]
			if msg := check.AboveCeiling(int64(*f.v), int64(permits), eff.Origin("bulkhead.permits", lvl)); msg != "" {
				add(Finding{RuleAdaptive, lvl, "adaptive_limit." + f.name, msg + ", or remove it"})
				return
			}
		}
		hi = min(hi, permits)
	}
	// The order of the values in force: a min_limit above the default
	// max_limit is refused too (under a bulkhead a default max_limit is
	// the permits, which min_limit already fits under). Blamed on the one
	// written at the more specific level.
	if a.MinLimit != nil && lo > hi {
		minLvl, maxLvl := eff.SetBy["adaptive_limit.min_limit"], eff.SetBy["adaptive_limit.max_limit"]
		if a.MaxLimit != nil && maxLvl > minLvl {
			add(Finding{RuleAdaptive, maxLvl, "adaptive_limit.max_limit", check.MaxBelowMin(int64(lo), int64(hi), eff.Origin("adaptive_limit.min_limit", maxLvl)).Options()})
		} else {
			add(Finding{RuleAdaptive, minLvl, "adaptive_limit.min_limit", check.MinAboveMax(int64(lo), int64(hi), eff.Origin("adaptive_limit.max_limit", minLvl)).Options()})
		}
		return
	}
	if a.InitialLimit != nil {
		if msg := check.InitialOutside(int64(*a.InitialLimit), int64(lo), int64(hi)).Options(); msg != "" {
			add(Finding{RuleAdaptive, eff.SetBy["adaptive_limit.initial_limit"], "adaptive_limit.initial_limit", msg + ", or remove it"})
		}
	}
}

// CheckOwnAdaptive checks an adaptive_limit written on a method: it needs
// per_method: true (the shared limit is tuned on the service) and a unary
// method.
func CheckOwnAdaptive(m protoreflect.MethodDescriptor, own *resilientv1.Policy, add func(Finding)) {
	a := own.GetAdaptiveLimit()
	switch kind := StreamKind(m); {
	case a == nil:
	case !a.GetPerMethod():
		add(Finding{RuleScope, LevelMethod, "adaptive_limit",
			"a method's own adaptive_limit needs per_method: true, which gives the method a limit of its own; to tune the limit the service's methods share, move these settings to (resilient.v1.service)"})
	case kind != "":
		add(Finding{RuleAdaptive, LevelMethod, "adaptive_limit",
			fmt.Sprintf("streams take no part in the adaptive limit, and %s is %s: a stream's lifetime says nothing of the dependency's latency; remove it", m.Name(), kind)})
	}
}

// AdaptiveLimitOf is the resolved adaptive limit of merged settings a
// under a bulkhead of permits (0 for none): every value in force, the
// ceiling applied to the defaults of max_limit and initial_limit. Those
// two follow other values, so they declare no default_value: they are
// internal/contract's, which the runtime's limiter reads too.
func AdaptiveLimitOf(a *resilientv1.AdaptiveLimit, permits uint32) (minLimit, maxLimit, initialLimit int) {
	minLimit = int(defaults().GetAdaptiveLimit().GetMinLimit())
	if a == nil {
		a = &resilientv1.AdaptiveLimit{}
	}
	if a.MinLimit != nil {
		minLimit = int(a.GetMinLimit())
	}
	maxLimit, _ = CeilingOf(minLimit, int(permits))
	if a.MaxLimit != nil {
		maxLimit = int(a.GetMaxLimit())
	}
	initialLimit = min(max(contract.AdaptiveInitialLimit, minLimit), maxLimit)
	if a.InitialLimit != nil {
		initialLimit = int(a.GetInitialLimit())
	}
	return minLimit, maxLimit, initialLimit
}
