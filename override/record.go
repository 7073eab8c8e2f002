package override

import (
	"strings"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// applyRecorded applies one overridden value to p, as applyLeaf, and
// returns the record of what it changed, for runtime.WithRecordedPolicy:
// every value of the groups the key writes (the service's shared one and
// each concerned method's own, or a method's timeout) whose value the key
// moved, under the keys of runtime.Change ("circuit_breaker.cool_down",
// "methods.GetStock.retry.max_attempts"), with the key as written as its
// source. A group the key adds lists its values as from "none", one it
// takes away (per_method: false) as to "none". The values are those of
// policy.Settings, which the runtime's own trail reads too.
func (t *service) applyRecorded(p *policy.Service, l *leaf) ([]runtime.Change, error) {
	before := t.snapshot(p, l)
	if err := t.applyLeaf(p, l); err != nil {
		return nil, err
	}
	after := t.snapshot(p, l)
	var out []runtime.Change
	for _, s := range after {
		old, ok := lookup(before, s.Key)
		if !ok {
			old = "none"
		}
		// A value the key writes is listed with it even where an earlier
		// key (or edit) left the same value: the later key is the one in
		// force, and merging the record makes it the source. Listed
		// unmoved, it is no change of its own (runtime drops a change
		// whose value is its annotated one).
		if old != s.Value || (ok && l.writes(s.Key)) {
			out = append(out, runtime.Change{Key: s.Key, Annotated: old, Value: s.Value, Source: l.source})
		}
	}
	for _, s := range before {
		if _, ok := lookup(after, s.Key); !ok {
			out = append(out, runtime.Change{Key: s.Key, Annotated: s.Value, Value: "none", Source: l.source})
		}
	}
	return out, nil
}

// writes reports whether l sets the value at key (a key of
// policy.Settings) itself, rather than moving it as a default that
// follows or comes with a group it adds: a method's key its value of that
// method; a service's key the shared group's value, the budget's and the
// throttle's, or each method's timeout, overall timeout or retry value (a
// service's value of a group its methods share tunes the shared one, not
// a method's own).
func (l *leaf) writes(key string) bool {
	if l.method != "" {
		return key == "methods."+l.method+"."+l.path
	}
	if key == l.path {
		return true
	}
	group, _, _ := strings.Cut(l.path, ".")
	if group != "timeout" && group != "overall_timeout" && group != "retry" {
		return false
	}
	rest, ok := strings.CutPrefix(key, "methods.")
	if !ok {
		return false
	}
	_, value, _ := strings.Cut(rest, ".")
	return value == l.path
}

func lookup(ss []policy.Setting, key string) (string, bool) {
	for _, s := range ss {
		if s.Key == key {
			return s.Value, true
		}
	}
	return "", false
}

// snapshot lists the values that l may write in p (policy.Settings,
// filtered): for a method's own value (timeout), that value of each method
// it concerns; for a group (retry, circuit_breaker, …), every value of the
// service's shared group and of each concerned method's own, those
// present.
func (t *service) snapshot(p *policy.Service, l *leaf) []policy.Setting {
	group, field, _ := strings.Cut(l.path, ".")
	concerns := func(key string) bool {
		if field != "" && strings.HasPrefix(key, group+".") {
			return true
		}
		if (group == "retry" || group == "hedging") && strings.HasPrefix(key, "retry_budget.") {
			return true // the first retry brings the default budget into force
		}
		rest, ok := strings.CutPrefix(key, "methods.")
		if !ok {
			return false
		}
		method, value, _ := strings.Cut(rest, ".")
		if l.method != "" && l.method != method {
			return false
		}
		if field == "" {
			return value == group
		}
		return strings.HasPrefix(value, group+".")
	}
	var out []policy.Setting
	for _, s := range p.Settings() {
		if concerns(s.Key) {
			out = append(out, s)
		}
	}
	return out
}
