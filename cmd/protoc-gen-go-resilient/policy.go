// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The resolved policy: the runtime/policy values the generated literals
// print, with the defaults of the options contract (internal/rules) filled
// in, so that a reader of the generated code sees every value in force, and
// the exports read the same values. What only the plugin needs wraps them.
type (
	// service is the resolution of one service.
	service struct {
		// Policy is the XxxResilientPolicy literal; methods[i].Policy
		// points to Policy.Methods[i].
		Policy policy.Service
		// Server is the XxxServerPolicy literal, nil when the service and
		// its methods have no server-side annotation (server.go).
		Server  *policy.Server
		methods []*method
		// shared is the record of the resolution: the file's and the
		// service's options merged, with the level that set each value,
		// which the exports read to say where a value came from
		// (rules.ServicePolicy).
		shared rules.Merged
	}
	// method is the resolution of one method.
	method struct {
		// Policy is the method's entry of the service's policy.
		Policy *policy.Method
		// Key is how generated code reads the idempotency key from the
		// request; nil for none.
		Key *keyField
		// CacheKeys read the cache's key fields from the request, in
		// order; nil without a cache.
		CacheKeys []*keyField
		// eff is the record of the method's resolution: the file's,
		// service's and method's options merged, with the level that set
		// each value (rules.MethodPolicy).
		eff rules.Merged
	}
	// keyField is a request field that holds a key: the idempotency key,
	// or one of the cache's key fields.
	keyField struct {
		Getter string // "GetOrderId"
		Func   string // the runtime function that formats it, "" for a string
		Conv   string // the Go conversion of the getter's result, "" for none
		// Presence says how generated code tells a cache key field with
		// presence (proto3 optional, a oneof member, proto2, an editions
		// field with explicit presence) set from unset: its part of the
		// key is then "" unset and "=" and its value set, so that unset and
		// a zero value are two keys. nil without presence, and for an
		// idempotency key, where 0 and unset are both no key.
		Presence *presence
	}
	// presence is how generated code tells a key field set on the request
	// "in", read from the Go API protoc-gen-go gives the message: the Has
	// method of the hybrid and opaque APIs, else (open API) the field's
	// pointer, slice or oneof wrapper.
	presence struct {
		Var string // the local variable holding the field's part of the key: "accountPart"
		Has string // the method that tells, "HasAccount"; "" under the open API
		// Field is the struct field compared with nil under the open API,
		// "Account", or for a oneof member the oneof's field, "At".
		Field string
		// Wrapper is the oneof member's wrapper type, asserted on Field
		// under the open API; empty for a field outside a oneof.
		Wrapper protogen.GoIdent
	}
)

// resolveFile checks and resolves the policy of every service of f,
// adding what is wrong to ps. The checks are internal/rules' CheckFile,
// exactly as the buf lint plugin runs them (less the lint-only
// RESILIENT_NO_TIMEOUT); resolving builds the data of the templates,
// which is only used when no check failed.
func resolveFile(f *protogen.File, ps *problems) []*service {
	checkFile(f, ps)
	var out []*service
	for _, s := range f.Services {
		out = append(out, resolveService(s))
	}
	return out
}

// checkFile reports the findings of rules.CheckFile on f at their places:
// the option value at fault, else the file, service or method.
func checkFile(f *protogen.File, ps *problems) {
	siteOf := sitesOf(f)
	rules.CheckFile(f.Desc, func(d protoreflect.Descriptor, finding rules.Finding) {
		if finding.Rule == rules.RuleNoTimeout {
			return // lint only: the caller's deadline still bounds such a call
		}
		ps.add(siteOf(d), finding.Level, finding.Path, "%s", finding.Message)
	})
}

// resolveService resolves the policy of s: the settings its methods share,
// from the file's and the service's options, and each method's.
func resolveService(s *protogen.Service) *service {
	_, shared := rules.ServicePolicy(s.Desc)
	sp := &service{Policy: policy.Service{Name: string(s.Desc.FullName())}, shared: shared}
	p := &sp.Policy
	if cb := shared.Policy.GetCircuitBreaker(); cb != nil {
		p.Breaker = resolved[policy.Breaker]("circuit_breaker", cb)
	}
	if bh := shared.Policy.GetBulkhead(); bh != nil {
		p.Bulkhead = resolved[policy.Bulkhead]("bulkhead", bh)
	}
	if rl := shared.Policy.GetRateLimit(); rl != nil {
		p.RateLimit = rateLimitOf(rl)
	}
	if al := shared.Policy.GetAdaptiveLimit(); al != nil {
		p.AdaptiveLimit = adaptiveLimitOf(al, shared.Policy.GetBulkhead())
	}
	if th := shared.Policy.GetClientThrottle(); th != nil {
		p.ClientThrottle = resolved[policy.Throttle]("client_throttle", th)
	}
	p.Methods = make([]policy.Method, len(s.Methods))
	retries := false
	for i, m := range s.Methods {
		mp := resolveMethod(m, &p.Methods[i])
		retries = retries || mp.Policy.Retry != nil || mp.Policy.Hedging != nil
		sp.methods = append(sp.methods, mp)
	}
	sp.Server = resolveServer(sp)
	// The budget exists only to bound retries and hedged copies (which it
	// pays for too, policy.Service.BudgetInForce); a service that does
	// neither has none, whatever its annotation says.
	if retries {
		p.Budget = resolved[policy.Budget]("retry_budget", shared.Policy.GetRetryBudget())
	}
	return sp
}

// resolveMethod resolves the policy of m into mp, its entry of the
// service's policy.
func resolveMethod(m *protogen.Method, mp *policy.Method) *method {
	own, eff := rules.MethodPolicy(m.Desc)

	p := eff.Policy
	*mp = policy.Method{
		Name:           fmt.Sprintf("/%s/%s", m.Parent.Desc.FullName(), m.Desc.Name()),
		Kind:           kindOf(m),
		Idempotent:     rules.Idempotent(m.Desc, eff),
		Timeout:        durationOf(p.GetTimeout(), 0),
		OverallTimeout: durationOf(p.GetOverallTimeout(), 0),
	}
	rm := &method{Policy: mp, eff: eff}
	// A streaming method takes the timeout, breaker and bulkhead of its
	// service, but neither retries nor an idempotency key: it ignores those
	// it inherits (and the rules refuse those written on it).
	if name := p.GetIdempotencyKey(); name != "" && streamKind(m) == "" {
		mp.IdempotencyKey = name
		rm.Key = keyFieldOf(m, name)
	}
	if rules.Retries(m.Desc, eff) {
		mp.Retry = resolved[policy.Retry]("retry", p.GetRetry())
	}
	if eff.Has("priority") {
		mp.Priority = priorityOf(p.GetPriority())
	}

	resolvePatterns(m, rm, own, eff)

	// A method's own breaker or bulkhead (per_method) starts from the
	// shared settings (file and service) and overrides them with its own.
	if own.GetCircuitBreaker().GetPerMethod() {
		mp.Breaker = resolved[policy.Breaker]("circuit_breaker", p.GetCircuitBreaker())
	}
	if own.GetBulkhead().GetPerMethod() {
		mp.Bulkhead = resolved[policy.Bulkhead]("bulkhead", p.GetBulkhead())
	}
	if own.GetAdaptiveLimit().GetPerMethod() && streamKind(m) == "" {
		mp.AdaptiveLimit = adaptiveLimitOf(p.GetAdaptiveLimit(), p.GetBulkhead())
	}
	return rm
}

func kindOf(m *protogen.Method) policy.Kind {
	switch {
	case m.Desc.IsStreamingClient() && m.Desc.IsStreamingServer():
		return policy.KindBidiStreaming
	case m.Desc.IsStreamingClient():
		return policy.KindClientStreaming
	case m.Desc.IsStreamingServer():
		return policy.KindServerStreaming
	default:
		return policy.KindUnary
	}
}

// priorityOf is the policy.Priority of an annotated priority.
func priorityOf(p resilientv1.Priority) policy.Priority {
	switch p {
	case resilientv1.Priority_PRIORITY_LOW:
		return policy.PriorityLow
	case resilientv1.Priority_PRIORITY_NORMAL:
		return policy.PriorityNormal
	case resilientv1.Priority_PRIORITY_HIGH:
		return policy.PriorityHigh
	case resilientv1.Priority_PRIORITY_CRITICAL:
		return policy.PriorityCritical
	}
	return policy.PriorityUnspecified
}

// streamKind describes a streaming method for messages ("a
// server-streaming method"); "" for unary.
func streamKind(m *protogen.Method) string { return rules.StreamKind(m.Desc) }

// keyFieldOf says how generated code reads the key field name of the
// request; nil when the request has no such key field (which the rules
// refuse).
func keyFieldOf(m *protogen.Method, name string) *keyField {
	if fl := fieldOf(m, name); fl != nil {
		return scalarKey(fl)
	}
	return nil
}

// fieldOf is the top-level field called name of the request of m; nil when the
// request has none.
func fieldOf(m *protogen.Method, name string) *protogen.Field {
	for _, fl := range m.Input.Fields {
		if string(fl.Desc.Name()) == name {
			return fl
		}
	}
	return nil
}

// durationOf converts a checked Duration; nil gives def.
func durationOf(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}

// resolved returns the policy value of one group of the options (T a
// policy.Retry, policy.Breaker, …): the contract's defaults of the group
// (rules.DefaultOf), then the merged options, field by field (fill).
func resolved[T any, M proto.Message](group string, options M) *T {
	v := new(T)
	fill(v, group, options)
	return v
}

// fill resolves one group of the options into dst, a policy value of the
// generated literal: the contract's defaults of the group, then the
// options, each into the field named as the option (rules.Fill). The
// options are checked (rules.Check), and every field has its place in dst
// (TestEveryOptionFieldIsWired), so that nothing fails here.
func fill[M proto.Message](dst any, group string, options M) {
	if err := rules.Fill(dst, rules.DefaultOf(group)); err != nil {
		panic(err) // the contract's own defaults fit the policy types
	}
	if err := rules.Fill(dst, options); err != nil {
		panic(err) // a field of the options without its place in the policy types: a test fails first
	}
}
