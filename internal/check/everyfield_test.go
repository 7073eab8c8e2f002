// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// fieldCase is one field of the options set to a value that is wrong
// for its kind.
type fieldCase struct {
	path string // "retry.max_attempts"
	fd   protoreflect.FieldDescriptor
	// value is the bad value as the options hold it, yaml as an override
	// file writes it.
	value protoreflect.Value
	yaml  string
}

// noBadValue are the fields no value of which is wrong on its own: a
// switch, a name checked against the request, a count for which 0 is a
// value.
var noBadValue = map[string]bool{
	"idempotent": true, "idempotency_key": true, "generate_idempotency_key": true,
	"retry_budget.min_retries":   true,
	"circuit_breaker.per_method": true, "bulkhead.per_method": true, "rate_limit.per_method": true, "adaptive_limit.per_method": true,
}

// goZero are the fields whose bad value for the options, 0, is in Go the
// value's default (a zero field of an AdaptiveLimit) or another setting
// (WindowCalls 0 is a window in time): not a mistake Go can make the same
// way.
var goZero = map[string]bool{
	"adaptive_limit.min_limit": true, "adaptive_limit.max_limit": true, "adaptive_limit.initial_limit": true,
	"circuit_breaker.window_calls": true,
}

// optionsOnly are the mistakes that exist only in the options: Go holds
// a cache's key fields without checking them (NewClient refuses an edit
// of the generated ones).
var optionsOnly = map[string]bool{"cache.key_fields": true}

// everyField lists every field of resilient.v1.Policy with a value wrong
// for its kind: a negative Duration, a count of 0, NaN, an enum number the
// options do not define, a code its list cannot hold, a name listed twice.
func everyField(t *testing.T) []fieldCase {
	var out []fieldCase
	var walk func(md protoreflect.MessageDescriptor, prefix string)
	walk = func(md protoreflect.MessageDescriptor, prefix string) {
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			path := prefix + string(fd.Name())
			if fd.Message() != nil && fd.Message().FullName() != "google.protobuf.Duration" {
				walk(fd.Message(), path+".")
				continue
			}
			c := fieldCase{path: path, fd: fd}
			switch {
			case noBadValue[path]:
				continue
			case fd.IsList() && strings.HasSuffix(path, "_codes"):
				c.yaml = "[OK]"
			case fd.IsList():
				c.yaml = "[id, id]"
			case fd.Message() != nil:
				c.value, c.yaml = protoreflect.ValueOfMessage((&durationpb.Duration{Seconds: -1}).ProtoReflect()), "-1s"
			case fd.Kind() == protoreflect.Uint32Kind:
				c.value, c.yaml = protoreflect.ValueOfUint32(0), "0"
			case fd.Kind() == protoreflect.DoubleKind:
				c.value, c.yaml = protoreflect.ValueOfFloat64(math.NaN()), ".nan"
			case fd.Kind() == protoreflect.EnumKind:
				c.value, c.yaml = protoreflect.ValueOfEnum(99), "99"
			case path == "shedding.code":
				c.value, c.yaml = protoreflect.ValueOfString("INTERNAL"), "INTERNAL"
			default:
				t.Errorf("%s: no bad value for its kind (%v): give it one here, or list it in noBadValue", path, fd.Kind())
				continue
			}
			out = append(out, c)
		}
	}
	walk((&resilientv1.Policy{}).ProtoReflect().Descriptor(), "")
	return out
}

// policyWith returns a policy setting c's field alone.
func policyWith(c fieldCase) *resilientv1.Policy {
	p := &resilientv1.Policy{}
	m := p.ProtoReflect()
	parts := strings.Split(c.path, ".")
	for _, part := range parts[:len(parts)-1] {
		m = m.Mutable(m.Descriptor().Fields().ByName(protoreflect.Name(part))).Message()
	}
	if c.fd.IsList() {
		l := m.NewField(c.fd).List()
		for _, name := range strings.Split(strings.Trim(c.yaml, "[]"), ", ") {
			l.Append(protoreflect.ValueOfString(name))
		}
		m.Set(c.fd, protoreflect.ValueOfList(l))
	} else {
		m.Set(c.fd, c.value)
	}
	return p
}

// onMethod says where a field is written: on a method for the groups a
// method decides (hedging, cache) and a method's own values (priority,
// server), on the service for the rest.
func onMethod(path string) bool {
	group, _, _ := strings.Cut(path, ".")
	switch group {
	case "hedging", "cache", "priority", "server":
		return true
	}
	return false
}

// atPath reports whether a finding's path is path or an element of it.
func atPath(got, path string) bool {
	return got == path || strings.HasPrefix(got, path+"[")
}

// TestEveryOptionRefusedAtEveryBoundary sets each field of the options
// with a value wrong for its kind alone, and shows every boundary refuses
// it at the field's path: the plugin and the lint plugin (rules.CheckFile,
// at the option's path), the override loader (at the key in the file, by
// Parse or, for a server key, ServerOptions), and a policy built in Go
// (Validate of a client's or a server's policy, at the Go field), where
// Go can make the same mistake.
func TestEveryOptionRefusedAtEveryBoundary(t *testing.T) {
	cases := everyField(t)
	if len(cases) < 40 {
		t.Fatalf("only %d fields with a bad value: the walk misses the options", len(cases))
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			p := policyWith(c)
			o, method := options{svc: p}, ""
			if onMethod(c.path) {
				o, method = options{get: p}, "Get"
			}
			refused := false
			for _, f := range optionFindings(t, o) {
				parts := strings.SplitN(f, ": ", 3)
				refused = refused || (parts[0] == method && atPath(parts[1], c.path))
			}
			if !refused {
				t.Errorf("the plugin and lint do not refuse %s: %s at %s: %v", c.path, c.yaml, c.path, optionFindings(t, o))
			}
			overrideRefuses(t, c)
			if !goZero[c.path] && !optionsOnly[c.path] {
				goRefuses(t, c, p)
			}
		})
	}
}

// overrideRefuses shows the override loader refuses c at its key, on
// GetStock for a method's value (ReserveStock, which deduplicates, for a
// server value), on the service for the rest.
func overrideRefuses(t *testing.T, c fieldCase) {
	t.Helper()
	var b strings.Builder
	b.WriteString("services:\n  example.inventory.v1.InventoryService:\n")
	indent := "    "
	if onMethod(c.path) {
		m := "GetStock"
		if strings.HasPrefix(c.path, "server.") {
			m = "ReserveStock"
		}
		fmt.Fprintf(&b, "%smethods:\n%s  %s:\n", indent, indent, m)
		indent += "    "
	}
	parts := strings.Split(c.path, ".")
	for i, part := range parts {
		if i < len(parts)-1 {
			fmt.Fprintf(&b, "%s%s:\n", indent, part)
			indent += "  "
		} else {
			fmt.Fprintf(&b, "%s%s: %s\n", indent, part, c.yaml)
		}
	}
	body := b.String()
	cp := inventoryv1.InventoryServiceResilientPolicy.Clone()
	set, err := override.Parse("o.yaml", []byte(body), nil, &cp)
	if err == nil {
		sv := inventoryv1.InventoryServiceServerPolicy.Clone()
		_, err = set.ServerOptions(&sv)
	}
	if err == nil || !strings.Contains(err.Error(), "o.yaml") || !strings.Contains(err.Error(), "."+parts[len(parts)-1]) {
		t.Errorf("the override loader does not refuse at its key:\n%s\n%v", body, err)
	}
}

// goRefuses shows Validate refuses the Go value of c, filled as the
// plugin fills it (the group's defaults, then the options), at its Go
// field.
func goRefuses(t *testing.T, c fieldCase, p *resilientv1.Policy) {
	t.Helper()
	group := c.path[:max(0, strings.LastIndex(c.path, "."))]
	fill := func(dst any) {
		t.Helper()
		if err := rules.Fill(dst, rules.DefaultOf(group)); err != nil {
			t.Fatal(err)
		}
		msg := p.ProtoReflect()
		if group != "" {
			for _, part := range strings.Split(group, ".") {
				msg = msg.Get(msg.Descriptor().Fields().ByName(protoreflect.Name(part))).Message()
			}
		}
		_ = rules.Fill(dst, msg.Interface()) // an enum of the options has no place: set below
	}
	svc := inventoryv1.InventoryServiceResilientPolicy.Clone()
	sv := inventoryv1.InventoryServiceServerPolicy.Clone()
	get := &svc.Methods[0]
	reserve := &sv.Methods[1]
	switch group {
	case "":
		fill(get)
		if c.path == "priority" {
			get.Priority = 99
		}
	case "retry":
		get.Retry = new(policy.Retry)
		fill(get.Retry)
	case "retry_budget":
		svc.Budget = new(policy.Budget)
		fill(svc.Budget)
	case "circuit_breaker":
		svc.Breaker = new(policy.Breaker)
		fill(svc.Breaker)
	case "bulkhead":
		svc.Bulkhead = &policy.Bulkhead{Permits: 4}
		fill(svc.Bulkhead)
	case "rate_limit":
		svc.RateLimit = &policy.RateLimit{RequestsPerSecond: 10, Burst: 10}
		fill(svc.RateLimit)
	case "hedging":
		get.Retry, get.Hedging = nil, &policy.Hedging{Delay: 10 * time.Millisecond}
		fill(get.Hedging)
	case "cache":
		get.Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, KeyFields: []string{"sku"}}
		fill(get.Cache)
	case "adaptive_limit":
		svc.AdaptiveLimit = new(policy.AdaptiveLimit)
		fill(svc.AdaptiveLimit)
	case "client_throttle":
		svc.ClientThrottle = new(policy.Throttle)
		fill(svc.ClientThrottle)
	case "shedding":
		sv.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4}}
		fill(&struct {
			*policy.Limits
			*policy.Shedding
		}{&sv.Shedding.Limits, sv.Shedding})
	case "server":
		fill(reserve)
	case "server.dedup":
		fill(reserve.Dedup)
		if c.path == "server.dedup.on_store_error" {
			reserve.Dedup.OnStoreError = 99
		}
	default:
		t.Fatalf("group %q has no place in this test's Go policy: give it one", group)
	}
	if !strings.HasSuffix(svc.Methods[0].Name, "/GetStock") || !strings.HasSuffix(reserve.Name, "/ReserveStock") {
		t.Fatalf("the example's methods moved: %s, %s", svc.Methods[0].Name, reserve.Name)
	}
	err := svc.Validate()
	if strings.HasPrefix(c.path, "shedding.") || strings.HasPrefix(c.path, "server.") {
		err = sv.Validate()
	}
	field := contract.GoName(c.path[strings.LastIndex(c.path, ".")+1:])
	if err == nil || !strings.Contains(err.Error(), field+":") {
		t.Errorf("Validate does not refuse %s at %s: %v", c.path, field, err)
	}
}
