package override

import (
	"fmt"
	"github.com/go-resilient/resilient/runtime/policy"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/runtime"
)

// applyRecorded applies one overridden value to p, as applyLeaf, and
// returns the record of what it changed, for runtime.WithRecordedPolicy:
// every value of the groups the key writes (the service's shared one and
// each concerned method's own, or a method's timeout) whose value the key
// moved, under the keys of runtime.Change ("circuit_breaker.cool_down",
// "methods.GetStock.retry.max_attempts"), with the key as written as its
// source. A group the key adds lists its values as from "none", one it
// takes away (per_method: false) as to "none". The values are read by the
// options' field names, so a field added to a group is recorded without
// a change here.
func (t *service) applyRecorded(p *policy.Service, l *leaf) ([]runtime.Change, error) {
	before := t.snapshot(p, l)
	if err := t.applyLeaf(p, l); err != nil {
		return nil, err
	}
	after := t.snapshot(p, l)
	var out []runtime.Change
	for _, s := range after {
		old, ok := lookup(before, s.key)
		if !ok {
			old = "none"
		}
		if old != s.value {
			out = append(out, runtime.Change{Key: s.key, Annotated: old, Value: s.value, Source: l.source})
		}
	}
	for _, s := range before {
		if _, ok := lookup(after, s.key); !ok {
			out = append(out, runtime.Change{Key: s.key, Annotated: s.value, Value: "none", Source: l.source})
		}
	}
	return out, nil
}

// setting is one value of a policy, by its key in runtime.Change.
type setting struct{ key, value string }

func lookup(ss []setting, key string) (string, bool) {
	for _, s := range ss {
		if s.key == key {
			return s.value, true
		}
	}
	return "", false
}

// snapshot lists the values that l may write in p: for a method's own
// value (timeout), that value of each method it concerns; for a group
// (retry, circuit_breaker, …), every value of the service's shared group
// and of each concerned method's own, those present.
func (t *service) snapshot(p *policy.Service, l *leaf) []setting {
	group, field, _ := strings.Cut(l.path, ".")
	var out []setting
	for i := range p.Methods {
		m := &p.Methods[i]
		name := methodName(m.Name)
		if l.method != "" && l.method != name {
			continue
		}
		pre := "methods." + name + "."
		if field == "" {
			out = append(out, setting{pre + group, render(group, reflect.ValueOf(m).Elem().FieldByName(rules.GoName(group)))})
			continue
		}
		out = append(out, groupValues(pre+group, reflect.ValueOf(m).Elem().FieldByName(goGroups[group]))...)
	}
	if field != "" {
		out = append(out, groupValues(group, reflect.ValueOf(p).Elem().FieldByName(goGroups[group]))...)
	}
	return out
}

// groupValues lists the values of the group policy g points to (none for
// a nil or missing one) under prefix, by the fields of its options
// message.
func groupValues(prefix string, g reflect.Value) []setting {
	if !g.IsValid() || g.Kind() != reflect.Pointer || g.IsNil() {
		return nil
	}
	msg := groupMessage(g.Interface())
	if msg == nil {
		return nil
	}
	var out []setting
	fields := msg.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		if name == "per_method" || (fd.Message() != nil && fd.Message().FullName() != "google.protobuf.Duration") {
			continue
		}
		if f := g.Elem().FieldByName(rules.GoName(name)); f.IsValid() {
			out = append(out, setting{prefix + "." + name, render(name, f)})
		}
	}
	return out
}

// noneWhenZero are the values whose zero means none, as Client.Describe
// writes them.
var noneWhenZero = map[string]bool{"timeout": true, "overall_timeout": true, "slow_call_threshold": true, "window_calls": true}

// render writes a policy value as Client.Describe and Client.Changes do.
func render(option string, f reflect.Value) string {
	if !f.IsValid() {
		return "none"
	}
	switch v := f.Interface().(type) {
	case time.Duration:
		if v == 0 && noneWhenZero[option] {
			return "none"
		}
	case int:
		if v == 0 && noneWhenZero[option] {
			return "none"
		}
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(f.Interface())
}
