// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"reflect"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/contract"
)

// Setting is one value of a policy, named with the field names of the
// annotations: "circuit_breaker.cool_down" for the service's,
// "methods.GetStock.retry.max_attempts" for a method's.
type Setting struct {
	Key   string
	Value string
}

// Settings lists every value of p, the service's first, then each
// method's in the order of Methods, each group's fields in the order of
// their type. The audit trail (runtime.Client.Changes) is the difference
// of two such lists, before and after an edit, and the override loader
// records what it applies the same way; the plugin's policy page
// (docs=true) lists them too. All read the values here, by reflection over
// the types, so a field added to a group is listed without a change
// anywhere else.
//
// A value whose zero means "none" (a timeout, slow_call_threshold, the
// idempotency key) is written "none"; a missing retry, and a missing
// shared breaker or bulkhead, as "none" under the group's own key
// ("methods.GetStock.retry", "circuit_breaker"), so that adding or
// removing one is a change. What names or binds a method (its name, kind,
// cache key fields) is not a setting. Its priority is, when it has one:
// the runtime sends it on every call, and the server sheds by it. The
// retry budget is the one in force (BudgetInForce): the default, when
// the service sets none and a method retries.
func (p *Service) Settings() []Setting {
	var out []Setting
	// The budget in force: without one of its own, a service whose
	// methods retry has the default.
	q := *p
	q.Budget = p.BudgetInForce()
	settingsOf(reflect.ValueOf(&q).Elem(), "", serviceNone, &out)
	for i := range p.Methods {
		pre := "methods." + shortName(p.Methods[i].Name) + "."
		settingsOf(reflect.ValueOf(&p.Methods[i]).Elem(), pre, methodNone, &out)
	}
	return out
}

// Settings lists every value of the server-side policy p as
// Service.Settings does, keyed as an override file writes them: the
// service's shedding ("shedding.low", "shedding.code"), then each
// method's server settings ("methods.ReserveStock.server.dedup.ttl"). A
// value whose zero means a default (the pushback, the code of a refusal,
// the lease) is written as that default; a missing shedding or dedup as
// "none". The dedup's Header and FinalCodes, set in Go only, have no
// option and are not listed; nor is a method's priority, which
// Service.Settings lists ("methods.ReserveStock.priority"): the client
// sends it and the server caps it, one value for both sides.
func (p *Server) Settings() []Setting {
	var out []Setting
	settingsOf(reflect.ValueOf(p).Elem(), "", serverNone, &out)
	for i := range p.Methods {
		pre := "methods." + shortName(p.Methods[i].Name) + ".server."
		m := p.Methods[i]
		m.Priority = PriorityUnspecified // the client's setting (methods.X.priority), not the server's
		settingsOf(reflect.ValueOf(&m).Elem(), pre, serverMethodNone, &out)
	}
	return out
}

// serviceNone, methodNone, serverNone and serverMethodNone are the groups
// listed as "none" when absent, at the service and at a method of each
// side; any other absent group is not listed (a method without a breaker
// of its own uses the service's).
var (
	serviceNone      = map[string]bool{"Breaker": true, "Bulkhead": true}
	methodNone       = map[string]bool{"Retry": true}
	serverNone       = map[string]bool{"Shedding": true}
	serverMethodNone = map[string]bool{"Dedup": true}
)

// notSettings are the fields Settings leaves out.
var notSettings = map[string]bool{
	"Name": true, "Kind": true, "Methods": true, "KeyFields": true,
	"NewResponse": true, "Header": true, "FinalCodes": true,
}

// defaultWhenZero are the values whose zero means a default, written as
// it.
var defaultWhenZero = map[string]any{
	"Pushback": DefaultShedPushback,
	"Code":     codes.Unavailable,
	"Lease":    DefaultLease,
}

// noneWhenZero are the values whose zero means none; omitWhenZero those
// not listed at all at their zero (a window in time has no window_calls;
// a method that does not generate keys has no generate_idempotency_key,
// one without a priority none).
var (
	noneWhenZero = map[string]bool{"Timeout": true, "OverallTimeout": true, "SlowCallThreshold": true, "IdempotencyKey": true, "DefaultTimeout": true, "MinDeadline": true}
	omitWhenZero = map[string]bool{"WindowCalls": true, "GenerateIdempotencyKey": true, "Priority": true}
)

// settingsOf appends the values of the struct v under prefix; a field
// holding a group (a pointer to a struct) is listed field by field, under
// the group's key; a struct held by value (the Limits of a Shedding), field
// by field under v's own prefix, as the options write it ("shedding.low").
func settingsOf(v reflect.Value, prefix string, none map[string]bool, out *[]Setting) {
	t := v.Type()
	for i := range t.NumField() {
		name := t.Field(i).Name
		f := v.Field(i)
		if notSettings[name] || (omitWhenZero[name] && f.IsZero()) {
			continue
		}
		if f.Kind() == reflect.Struct {
			settingsOf(f, prefix, nil, out)
			continue
		}
		key := prefix + contract.OptionName(name)
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				if none[name] {
					*out = append(*out, Setting{key, "none"})
				}
				continue
			}
			settingsOf(f.Elem(), key+".", nil, out)
			continue
		}
		*out = append(*out, Setting{key, render(name, f)})
	}
}

// render writes one value as Describe does: durations as time.Duration
// prints them, numbers as Go writes them shortest, codes and code sets by
// name.
func render(name string, f reflect.Value) string {
	if f.IsZero() {
		if noneWhenZero[name] {
			return "none"
		}
		if def, ok := defaultWhenZero[name]; ok {
			f = reflect.ValueOf(def)
		}
	}
	switch v := f.Interface().(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case codes.Code:
		return codename.Of(v)
	}
	return fmt.Sprint(f.Interface()) // time.Duration and CodeSet by their String
}
