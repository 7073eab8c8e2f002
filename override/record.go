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
		if old != s.Value {
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
