// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// groups are the groups of the options with the Go value of runtime/policy
// their values fill ("" for the values of a policy in no group), whose
// checks (policy.GroupProblems) say what is wrong with each value: one row
// a group, none a field. value returns where Fill writes the options (dst)
// and the value to check; they differ where the policy types hold a group
// in two parts (a Shedding's Limits) or an enum of the options is turned
// into the policy's own type.
var groups = []struct {
	path  string
	value func() (dst, checked any)
}{
	{"", same[policy.Method]},
	{"retry", same[policy.Retry]},
	{"retry_budget", same[policy.Budget]},
	{"circuit_breaker", same[policy.Breaker]},
	{"bulkhead", same[policy.Bulkhead]},
	{"rate_limit", same[policy.RateLimit]},
	{"hedging", same[policy.Hedging]},
	{"cache", same[policy.Cache]},
	{"adaptive_limit", same[policy.AdaptiveLimit]},
	{"client_throttle", same[policy.Throttle]},
	{"server", same[policy.ServerMethod]},
	{"server.dedup", func() (any, any) {
		v := new(policy.Dedup)
		return &struct {
			*policy.Dedup
			OnStoreError resilientv1.OnStoreError // an unknown one is the walk's
		}{Dedup: v}, v
	}},
	{"shedding", func() (any, any) {
		v := new(policy.Shedding)
		return &struct {
			*policy.Limits
			*policy.Shedding
		}{&v.Limits, v}, v
	}},
}

// same is the value of a group whose Go value is both where Fill writes
// and what is checked: a new T.
func same[T any]() (dst, checked any) { v := new(T); return v, v }

// checkValues refuses, in p, the values its groups' Go checks refuse
// (policy.GroupProblems), each at its key, and only where p sets it: the
// group is filled with the contract's defaults (DefaultOf), then p's
// values, then the values that follow another (Follow), and checked as
// runtime/policy checks a policy built in Go. A problem of two values
// (Pair) is left to the checks on merged levels (CheckMethod, …): a
// level's max_backoff may be right once another level's initial_backoff
// is merged. skip holds the groups refused where they are written,
// refused the paths the walk refused already (a value that did not
// convert), whose Go value means nothing.
func checkValues(p *resilientv1.Policy, skip, refused map[string]bool, add Report) {
	for _, g := range groups {
		msg := groupAt(p.ProtoReflect(), g.path)
		if msg == nil || skip[g.path] {
			continue
		}
		dst, checked := g.value()
		_ = Fill(dst, DefaultOf(g.path)) // a field without a place (an enum) is checked by the walk
		_ = Fill(dst, msg.Interface())
		Follow(dst, nil, g.path, SetIn(msg.Interface()))
		for _, pr := range policy.GroupProblems(checked) {
			fd := msg.Descriptor().Fields().ByName(protoreflect.Name(pr.Key))
			key := join(g.path, pr.Key)
			if pr.Pair || fd == nil || fd.IsList() || !msg.Has(fd) || refused[key] {
				continue
			}
			add(key, "%s%s", pr.Core, mend(g.path, pr.Key, pr.Unset))
		}
	}
}

// groupAt returns the group at path in m ("" for m), nil when m does not
// set it.
func groupAt(m protoreflect.Message, path string) protoreflect.Message {
	if path == "" {
		return m
	}
	for _, name := range strings.Split(path, ".") {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil || fd.Message() == nil || !m.Has(fd) {
			return nil
		}
		m = m.Get(fd).Message()
	}
	return m
}

func join(group, field string) string {
	if group == "" {
		return field
	}
	return group + "." + field
}

// mend says how an options author mends a value refused at field of
// group: leave it out for its default, as the contract (DefaultOf), the
// values that follow another (Follow) or what leaving it out stands for
// (unset, from the Go check) say; "" when leaving it out is no mend (a
// value without a default, required once its group is set).
func mend(group, field, unset string) string {
	if d := DefaultOf(group); d != nil {
		m := d.ProtoReflect()
		if fd := m.Descriptor().Fields().ByName(protoreflect.Name(field)); fd != nil && !fd.IsList() && m.Has(fd) {
			return "; remove it for the default " + optionText(fd, m.Get(fd))
		}
	}
	for _, f := range followers {
		if f.group == group && f.option == field {
			return "; remove it " + f.unset
		}
	}
	if unset != "" {
		return "; remove it " + unset
	}
	return ""
}

// optionText writes a single value of the options as a message shows it:
// a Duration as Go prints a time.Duration, a number shortest, a name
// quoted.
func optionText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.Message() != nil:
		if d, ok := v.Message().Interface().(*durationpb.Duration); ok {
			return d.AsDuration().String()
		}
	case fd.Kind() == protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case fd.Kind() == protoreflect.StringKind:
		return strconv.Quote(v.String())
	}
	return v.String()
}

// placement says where a group may be written: only on a method (a
// method's own decision), or never on one (shared by the whole
// dependency or service); fix is the message that refuses it elsewhere.
var placement = []struct {
	group        string
	onlyOnMethod bool
	fix          string
}{
	{"retry_budget", false, "retry_budget is shared by the whole dependency: set it on the service or the file"},
	{"client_throttle", false, "client_throttle judges the whole dependency: set it on the service or the file"},
	{"shedding", false, "shedding limits the requests in flight of the whole service: set it on the service or the file, and give the method a priority instead"},
	{"hedging", true, "hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method"},
	{"cache", true, "a cache is keyed by the fields of one method's request: move it to the (resilient.v1.method) of each cached method"},
}

// perMethod are the groups a method may have of its own (per_method:
// true, only meaningful on a method), with how to write one.
var perMethod = []struct{ group, example, noun string }{
	{"circuit_breaker", "circuit_breaker: {per_method: true}", "a breaker"},
	{"bulkhead", "bulkhead: {per_method: true, permits: N}", "a bulkhead"},
	{"rate_limit", "rate_limit: {per_method: true, requests_per_second: N}", "a limit"},
	{"adaptive_limit", "adaptive_limit: {per_method: true}", "a limit"},
}

// checkPlacement refuses a group written where it does not belong,
// returning the groups whose values are then not checked.
func checkPlacement(p *resilientv1.Policy, onMethod bool, add Report) map[string]bool {
	skip := map[string]bool{}
	m := p.ProtoReflect()
	for _, pl := range placement {
		if groupAt(m, pl.group) != nil && pl.onlyOnMethod != onMethod {
			add(pl.group, "%s", pl.fix)
			skip[pl.group] = true
		}
	}
	if !onMethod {
		for _, g := range perMethod {
			if msg := groupAt(m, g.group); msg != nil && msg.Has(msg.Descriptor().Fields().ByName("per_method")) {
				add(g.group+".per_method", "per_method is only meaningful on a method: remove it here, and set %s on each method that needs %s of its own", g.example, g.noun)
			}
		}
	}
	return skip
}

// codeLists are the lists of status codes of the options, by what their
// codes mean; codeFields the options that hold one status code, with the
// check of the codes it may hold (by name, "" for one it may).
var (
	codeLists = map[string]check.List{
		"retry.retryable_codes":         check.Retryable,
		"circuit_breaker.failure_codes": check.Failure,
		"hedging.non_fatal_codes":       check.NonFatal,
	}
	codeFields = map[string]func(name string) string{"shedding.code": check.SheddingCode}
)

// walk refuses what exists only in the options, whatever the field: a
// Duration that is not one or does not fit a time.Duration, a status code
// name gRPC does not define, a code a list cannot hold, an enum number the
// options do not define, a name listed twice. It records the paths it
// refused in refused (without an index), and skips the groups in skip.
func walk(m protoreflect.Message, prefix string, skip, refused map[string]bool, add Report) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		bad := func(at, format string, args ...any) {
			refused[path] = true
			add(at, format, args...)
		}
		switch {
		case skip[path]:
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			checkNames(path, v.List(), bad)
		case fd.IsList() || fd.IsMap():
		case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration":
			validDuration(path, durationOf(v.Message()), bad)
		case fd.Message() != nil:
			walk(v.Message(), path+".", skip, refused, add)
		case fd.Enum() != nil:
			if fd.Enum().Values().ByNumber(v.Enum()) == nil {
				bad(path, "unknown value %d, perhaps of a newer version of the options than this program knows: write %s, or upgrade this program to the version of your copy of resilient.proto", v.Enum(), enumNames(fd.Enum()))
			}
		case fd.Kind() == protoreflect.StringKind && codeFields[path] != nil:
			name, allowed := v.String(), codeFields[path]
			if _, known := ParseCode(name); !known {
				fix := mend(strings.TrimSuffix(prefix, "."), string(fd.Name()), "")
				// A misspelling of a code the field holds is told its
				// spelling; any other name what the field holds, never a
				// code the field refuses next.
				if canon, ok := canonicalCode(name); ok && allowed(canon) == "" {
					bad(path, "unknown status code %q: %s%s", name, suggestCode(name), fix)
				} else {
					bad(path, "%s%s", allowed(name), fix)
				}
			}
		}
		return true
	})
}

// checkNames checks a list of names, each at its index: status codes
// (codeLists) known to gRPC and allowed in their list, and no name, code
// or other, listed twice. A code listed twice is refused, not merged: the
// author meant another code, or the list was edited without being read
// (["UNAVAILABLE", "UNAVAILABLE"] where "DEADLINE_EXCEEDED" was meant).
func checkNames(path string, names protoreflect.List, bad Report) {
	list, codeList := codeLists[path]
	seen := map[string]bool{}
	for i := range names.Len() {
		name, at := names.Get(i).String(), fmt.Sprintf("%s[%d]", path, i)
		code, known := ParseCode(name)
		switch {
		case codeList && !known:
			bad(at, "unknown status code %q: %s", name, suggestCode(name))
		case codeList && check.Code(list, code) != "":
			bad(at, "%s", check.Code(list, code))
		case seen[name]:
			bad(at, "%q is listed twice: remove the repeat", name)
		}
		seen[name] = true
	}
}

// enumNames lists the names of an enum an author may write, as in "A, B
// or C": every value but the one that says nothing (…_UNSPECIFIED).
func enumNames(ed protoreflect.EnumDescriptor) string {
	var names []string
	for i := range ed.Values().Len() {
		if n := string(ed.Values().Get(i).Name()); !strings.HasSuffix(n, "_UNSPECIFIED") {
			names = append(names, n)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// durationOf reads a Duration of any concrete type.
func durationOf(m protoreflect.Message) *durationpb.Duration {
	if d, ok := m.Interface().(*durationpb.Duration); ok {
		return d
	}
	f := m.Descriptor().Fields()
	d := &durationpb.Duration{}
	if fd := f.ByName("seconds"); fd != nil && fd.Kind() == protoreflect.Int64Kind {
		d.Seconds = m.Get(fd).Int()
	}
	if fd := f.ByName("nanos"); fd != nil && fd.Kind() == protoreflect.Int32Kind {
		d.Nanos = int32(m.Get(fd).Int())
	}
	return d
}
