// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rules holds the checks of a resilient.v1.Policy and the defaults
// of the options contract (each field's (resilient.v1.default_value),
// defaults.go), shared by the plugin (which reports a problem at its place
// in the .proto), the buf check plugin (which reports it as a lint rule,
// lint.go) and the override loader (which reports it at its key in the
// file or environment). One implementation, so that lint refuses
// what the plugin refuses, and an operator can never set through an
// override what the plugin refuses in a .proto.
//
// A value is checked once, by the check of its Go field in runtime/policy
// (policy.GroupProblems, which Validate runs too, in the words of
// internal/check): Check fills each group an option sets (its defaults,
// then the option's values) into the group's Go value and reports each
// problem of a value the option sets, at its path, with how an options
// author mends it ("remove it for the default 10s"). What exists only in
// the options is checked by kind, for every field alike (values.go): a
// Duration's encoding, status code names and the codes a list may hold,
// enum numbers, names listed twice, where a group may be written. The
// checks of several values, levels or the method's descriptor run on the
// merged levels (CheckService, CheckMethod, CheckShedding), blaming the
// level that set the value at fault. So a new field of a group has its
// check in runtime/policy and none here.
package rules

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/codename"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// DefaultBurst is the burst of a rate limit that sets none: its rate
// rounded up, at least 1 and at most math.MaxInt32; 1 for a rate that is
// not positive and finite (which Check refuses).
func DefaultBurst(requestsPerSecond float64) int {
	if x := requestsPerSecond; x > 0 && !math.IsInf(x, 0) {
		return int(max(1, min(math.Ceil(x), math.MaxInt32)))
	}
	return 1
}

// Report receives one problem: the field path inside the policy
// ("retry.max_attempts") and what is wrong and how to mend it.
type Report func(path, format string, args ...any)

// Check checks the values written in one policy, each on its own (the
// checks that involve several values, levels or the method's descriptor
// are CheckService, CheckMethod and CheckShedding). onMethod says whether
// the policy applies to a single method (a (resilient.v1.method) option,
// or an override of one method). It has no line of its own for any
// field: what exists only in the options (a group's placement, a
// Duration's encoding, status code and enum names, repeats) is checked
// by kind (walk), and every value by the check of its Go field in
// runtime/policy (checkValues), with the mend of an options author.
func Check(p *resilientv1.Policy, onMethod bool, add Report) {
	if p == nil {
		return
	}
	// The problems are reported in the order of the fields of the
	// options, whichever check found them.
	var found []finding
	collect := func(path, format string, args ...any) {
		found = append(found, finding{orderOf(p.ProtoReflect().Descriptor(), path), path, fmt.Sprintf(format, args...)})
	}
	skip := checkPlacement(p, onMethod, collect)
	refused := map[string]bool{}
	walk(p.ProtoReflect(), "", skip, refused, collect)
	if cb := p.GetCircuitBreaker(); cb != nil && cb.WindowCalls != nil && cb.Window != nil {
		// The options' one pair of exclusive values, written side by side.
		collect("circuit_breaker.window_calls", "is set beside window: the breaker counts over the last calls or over a stretch of time, not both; remove one")
	}
	checkValues(p, skip, refused, collect)
	slices.SortStableFunc(found, func(a, b finding) int { return slices.Compare(a.order, b.order) })
	for _, f := range found {
		add(f.path, "%s", f.message)
	}
}

// finding is one problem Check found, with the place of its field among
// the fields of the options (orderOf).
type finding struct {
	order         []int
	path, message string
}

// orderOf returns the place of the field at path ("retry.retryable_codes[1]")
// in the options: the index of each field in its message, then the index
// in its list.
func orderOf(md protoreflect.MessageDescriptor, path string) []int {
	var out []int
	name, index, _ := strings.Cut(path, "[")
	for _, part := range strings.Split(name, ".") {
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByName(protoreflect.Name(part))
		}
		if fd == nil {
			return append(out, math.MaxInt)
		}
		out = append(out, fd.Index())
		md = fd.Message()
	}
	if i, err := strconv.Atoi(strings.TrimSuffix(index, "]")); err == nil {
		out = append(out, i)
	}
	return out
}

// SheddingLimits checks the four limits of a resolved shedding policy
// together: every one set, and none below the limit of a lower priority.
// add receives the field that is wrong.
func SheddingLimits(low, normal, high, critical *uint32, add Report) {
	sheddingLimits(low, normal, high, critical, add, add)
}

// sheddingLimits is SheddingLimits, reporting a limit left unset to
// missing and one below a lower priority's to order.
func sheddingLimits(low, normal, high, critical *uint32, missing, order Report) {
	prev, prevName := uint32(0), ""
	for _, l := range []struct {
		name string
		v    *uint32
	}{{"low", low}, {"normal", normal}, {"high", high}, {"critical", critical}} {
		switch {
		case l.v == nil:
			missing("shedding."+l.name, "is required: set the in-flight limit of every priority, as in shedding: {low: 50, normal: 150, high: 180, critical: 200}")
			continue
		case *l.v < prev:
			order("shedding."+l.name, "%s; raise %s or lower %s", check.SheddingBelow(int64(*l.v), int64(prev), prevName), l.name, prevName)
		}
		if *l.v >= prev {
			prev, prevName = *l.v, l.name
		}
	}
}

// The longest time.Duration, 2562047h47m16.854775807s, is maxSeconds
// whole seconds and maxNanos nanoseconds; the shortest is its negative
// less a nanosecond (math.MinInt64 ns).
const (
	maxSeconds = math.MaxInt64 / int64(time.Second)
	maxNanos   = int32(math.MaxInt64 % int64(time.Second))
)

// validDuration reports whether d is a valid Duration that fits a
// time.Duration, refusing it at path when not.
func validDuration(path string, d *durationpb.Duration, add Report) bool {
	s, n := d.GetSeconds(), d.GetNanos()
	switch {
	case n <= -1e9 || n >= 1e9:
		add(path, "is not a valid duration: nanos %d must lie within ±999999999; carry whole seconds into seconds, as in {seconds: 1, nanos: 500000000} for 1.5s", n)
	case (s > 0 && n < 0) || (s < 0 && n > 0):
		add(path, "is not a valid duration: seconds %d and nanos %d must have the same sign", s, n)
	case !fitsDuration(s, n):
		written := fmt.Sprintf("%d seconds", s)
		if n != 0 {
			written += fmt.Sprintf(" and %d nanos", n)
		}
		add(path, "is not a valid duration: %s is more than a Go time.Duration holds (about 292 years: at most %d seconds and %d nanos either way)", written, maxSeconds, maxNanos)
	default:
		return true
	}
	return false
}

// fitsDuration reports whether s seconds and n nanoseconds, of the same
// sign, lie within a time.Duration.
func fitsDuration(s int64, n int32) bool {
	switch {
	case s > maxSeconds || s < -maxSeconds:
		return false
	case s == maxSeconds:
		return n <= maxNanos
	case s == -maxSeconds:
		return n >= -maxNanos-1
	}
	return true
}

// ParseCode returns the code of a canonical name, as the runtime parses it,
// "OK" included, so that it can be refused with its own reason.
func ParseCode(name string) (codes.Code, bool) { return codename.Parse(name) }

// CodesOf parses checked code names, dropping repeats; none gives def.
func CodesOf(names []string, def []codes.Code) []codes.Code {
	if len(names) == 0 {
		return def
	}
	var out []codes.Code
	seen := map[codes.Code]bool{}
	for _, n := range names {
		if c, ok := ParseCode(n); ok && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// suggestCode says how to write a code name that was not recognised.
func suggestCode(name string) string {
	if canon, ok := canonicalCode(name); ok {
		return fmt.Sprintf("did you mean %q? Codes are written by their canonical upper-case name", canon)
	}
	return `write a canonical upper-case gRPC code name, such as "UNAVAILABLE" or "DEADLINE_EXCEEDED"`
}

// canonicalCode returns the canonical name of the code a name that was
// not recognised is a misspelling of (case, "_", "-", spaces,
// "CANCELLED"), false for none.
func canonicalCode(name string) (string, bool) {
	norm := func(s string) string {
		s = strings.ToUpper(s)
		s = strings.NewReplacer("_", "", "-", "", " ", "", "CANCELLED", "CANCELED").Replace(s)
		return s
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if canon := codename.Of(c); norm(name) == norm(canon) {
			return canon, true
		}
	}
	return "", false
}
