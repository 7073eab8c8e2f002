// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"github.com/go-resilient/resilient/internal/contract"
	"reflect"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/runtime/policy"
)

// followers are the values whose default follows another value of their
// group rather than a constant of the table of defaults.
var followers = []struct {
	group, option, leader string
	of                    func(leader reflect.Value) any
	// unset says what leaving the value out gives, after "remove it".
	unset string
}{
	// A rate limit's burst is its rate rounded up.
	{"rate_limit", "burst", "requests_per_second", func(r reflect.Value) any { return DefaultBurst(r.Float()) }, "for the default, requests_per_second rounded up"},
	// A cache without stale_ttl serves no stale answers: stale as long as
	// fresh.
	{"cache", "stale_ttl", "fresh_ttl", func(f reflect.Value) any { return time.Duration(f.Int()) }, "for no stale answers (the default, equal to fresh_ttl)"},
}

// bounded are the values whose default is a constant of the contract held
// within other values, which it then follows (AdaptiveLimitOf): an
// adaptive limit's max_limit at most the bulkhead's permits, its
// initial_limit within max_limit and min_limit.
var bounded = []struct {
	group, option string
	leaders       []string
}{
	{"adaptive_limit", "max_limit", []string{"bulkhead.permits"}},
	{"adaptive_limit", "initial_limit", []string{"adaptive_limit.max_limit", "adaptive_limit.min_limit"}},
}

// Followed names the value that the default of the value at key
// ("rate_limit.burst") follows, by its key ("rate_limit.requests_per_second"),
// for a value no level sets; "" when its default is the contract's own
// constant. in returns a value in force by key, as policy.Settings writes
// it ("" for none). A value Follow computes follows its leader always; a
// bounded one (an adaptive limit's max_limit and initial_limit) the bound
// it equals, if any: the one that held it.
func Followed(key string, in func(key string) string) string {
	group, option, _ := strings.Cut(key, ".")
	for _, f := range followers {
		if f.group == group && f.option == option {
			return group + "." + f.leader
		}
	}
	for _, b := range bounded {
		if b.group != group || b.option != option {
			continue
		}
		for _, l := range b.leaders {
			if v := in(l); v != "" && v == in(key) {
				return l
			}
		}
	}
	return ""
}

// Follow writes into dst, the policy of one group of the options
// ("rate_limit", "cache"), each value whose default follows another value
// of the group: a rate limit's burst follows its requests_per_second
// (DefaultBurst), a cache's stale_ttl its fresh_ttl. It writes only a
// value that set (by option name) reports unset and, when was is the
// group's policy before an edit (nil for none), one that followed there
// too: zero, or what it follows. So the plugin fills the default of a
// value the .proto leaves out, and an override that moves a rate moves a
// burst that was its default with it and leaves one the annotation chose
// (a burst written equal to its rate rounded up counts as the default).
// It is the one place these defaults are computed.
func Follow(dst, was any, group string, set func(option string) bool) {
	d := reflect.ValueOf(dst).Elem()
	var w reflect.Value
	if was != nil && !reflect.ValueOf(was).IsNil() {
		w = reflect.ValueOf(was).Elem()
	}
	for _, f := range followers {
		if f.group != group || set(f.option) {
			continue
		}
		field, leader := d.FieldByName(contract.GoName(f.option)), d.FieldByName(contract.GoName(f.leader))
		if !field.IsValid() || !leader.IsValid() {
			continue
		}
		if w.IsValid() {
			old := w.FieldByName(contract.GoName(f.option))
			if !old.IsZero() && !old.Equal(reflect.ValueOf(f.of(w.FieldByName(contract.GoName(f.leader)))).Convert(old.Type())) {
				continue // chosen, not the default
			}
		}
		field.Set(reflect.ValueOf(f.of(leader)).Convert(field.Type()))
	}
}

// SetIn reports, for Follow, whether msg sets the option of that name.
func SetIn(msg proto.Message) func(option string) bool {
	return func(option string) bool {
		m := msg.ProtoReflect()
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(option))
		return fd != nil && m.Has(fd)
	}
}

// CeilingOf returns the defaults of an adaptive limit's max_limit and
// initial_limit under a bulkhead of permits (0 for none) with minLimit in
// force: the contract's, held under the permits (as AdaptiveLimitOf).
func CeilingOf(minLimit, permits int) (maxLimit, initialLimit int) {
	maxLimit = contract.AdaptiveMaxLimit
	if permits > 0 {
		maxLimit = min(maxLimit, permits)
	}
	return maxLimit, min(max(contract.AdaptiveInitialLimit, minLimit), maxLimit)
}

// FollowPermits moves the max_limit and initial_limit of the adaptive
// limit a (nil for none) that were their defaults under a bulkhead of old
// permits to their defaults under permits, as the .proto with those
// permits gives them; a value set reports set (an override of the same
// limit), or that the annotation chose otherwise, stays. A value written
// equal to its default counts as the default, as for Follow.
func FollowPermits(a *policy.AdaptiveLimit, old, permits int, set func(option string) bool) {
	if a == nil {
		return
	}
	oldMax, oldInitial := CeilingOf(a.MinLimit, old)
	newMax, _ := CeilingOf(a.MinLimit, permits)
	if a.MaxLimit == oldMax && !set("max_limit") {
		a.MaxLimit = newMax
	}
	if a.InitialLimit == oldInitial && !set("initial_limit") {
		a.InitialLimit = min(max(contract.AdaptiveInitialLimit, a.MinLimit), a.MaxLimit)
	}
}
