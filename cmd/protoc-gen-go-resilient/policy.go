// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// The resolved policy: what the generated literals hold, with the defaults
// of the options contract (internal/rules) filled in, so that a reader of
// the generated code sees every value in force. These mirror the runtime's
// types, but keep status codes in the order they were written so that the
// generated code reads like the annotation.
type (
	servicePolicy struct {
		Name     string
		Budget   *budgetPolicy
		Breaker  *breakerPolicy
		Bulkhead *bulkheadPolicy
		// RateLimit is the token bucket the service's methods share.
		RateLimit *rateLimitPolicy
		// AdaptiveLimit and ClientThrottle: adaptive.go.
		AdaptiveLimit  *adaptiveLimitPolicy
		ClientThrottle *throttlePolicy
		Methods        []*methodPolicy
		// Server is the server-side policy, nil when the service and its
		// methods have no server-side annotation (server.go).
		Server *serverPolicy
		// shared is the record of the resolution: the file's and the
		// service's options merged, with the level that set each value,
		// which the exports read to say where a value came from.
		shared merged
	}
	methodPolicy struct {
		Name           string
		Kind           string // the name of the policy.Kind constant
		Idempotent     bool
		IdempotencyKey string
		Timeout        time.Duration
		OverallTimeout time.Duration
		Retry          *retryPolicy
		Breaker        *breakerPolicy
		Bulkhead       *bulkheadPolicy
		// Key is how generated code reads the idempotency key from the
		// request; nil for none.
		Key *keyField
		// GenerateIdempotencyKey, Hedging, RateLimit (the method's own) and
		// Cache: patterns.go.
		GenerateIdempotencyKey bool
		Hedging                *hedgingPolicy
		RateLimit              *rateLimitPolicy
		Cache                  *cachePolicy
		// AdaptiveLimit is the method's own (per_method): adaptive.go.
		AdaptiveLimit *adaptiveLimitPolicy
		// Priority is the name of the annotated policy.Priority constant
		// ("PriorityHigh"), "" when no level sets a priority.
		Priority string
		// Server is the method's server-side policy (server.go).
		Server *serverMethodPolicy
		// eff is the record of the method's resolution: the file's,
		// service's and method's options merged, with the level that set
		// each value.
		eff merged
	}
	retryPolicy struct {
		MaxAttempts    int
		InitialBackoff time.Duration
		MaxBackoff     time.Duration
		Multiplier     float64
		RetryableCodes []codes.Code
	}
	budgetPolicy struct {
		Ratio      float64
		MinRetries int
		Window     time.Duration
	}
	breakerPolicy struct {
		FailureRatio      float64
		MinimumCalls      int
		Window            time.Duration
		WindowCalls       int
		CoolDown          time.Duration
		HalfOpenProbes    int
		SlowCallThreshold time.Duration
		FailureCodes      []codes.Code
	}
	bulkheadPolicy struct {
		Permits int
		MaxWait time.Duration
	}
	// keyField is the request field that holds the idempotency key.
	keyField struct {
		Getter string // "GetOrderId"
		Func   string // the runtime function that formats it, "" for a string
		Conv   string // the Go conversion of the getter's result, "" for none
	}
)

// policyOf returns the extension xt of a descriptor's options, or nil.
func policyOf(opts proto.Message, xt protoreflect.ExtensionType) *resilientv1.Policy {
	if opts == nil || !proto.HasExtension(opts, xt) {
		return nil
	}
	p, _ := proto.GetExtension(opts, xt).(*resilientv1.Policy)
	return p
}

// resolveFile checks and resolves the policy of every service of f,
// adding what is wrong to ps. The checks are internal/rules' CheckFile,
// exactly as the buf lint plugin runs them (less the lint-only
// RESILIENT_NO_TIMEOUT); resolving builds the data of the templates,
// which is only used when no check failed.
func resolveFile(f *protogen.File, ps *problems) []*servicePolicy {
	checkFile(f, ps)
	filePolicy := policyOf(f.Desc.Options(), resilientv1.E_File)
	var out []*servicePolicy
	for _, s := range f.Services {
		out = append(out, resolveService(s, filePolicy))
	}
	return out
}

// checkFile reports the findings of rules.CheckFile on f at their places:
// the option value at fault, else the file, service or method.
func checkFile(f *protogen.File, ps *problems) {
	sites := map[protoreflect.FullName]site{}
	for _, s := range f.Services {
		sites[s.Desc.FullName()] = serviceSite(f, s)
		for _, m := range s.Methods {
			sites[m.Desc.FullName()] = methodSite(f, m)
		}
	}
	file := fileSite(f)
	rules.CheckFile(f.Desc, func(d protoreflect.Descriptor, finding rules.Finding) {
		if finding.Rule == rules.RuleNoTimeout {
			return // lint only: the caller's deadline still bounds such a call
		}
		at, ok := sites[d.FullName()]
		if _, isFile := d.(protoreflect.FileDescriptor); isFile || !ok {
			at = file
		}
		ps.add(at, level(finding.Level), finding.Path, "%s", finding.Message)
	})
}

func resolveService(s *protogen.Service, filePolicy *resilientv1.Policy) *servicePolicy {
	svcPolicy := policyOf(s.Desc.Options(), resilientv1.E_Service)
	shared := mergeLayers(layer{levelFile, filePolicy}, layer{levelService, svcPolicy})
	sp := &servicePolicy{Name: string(s.Desc.FullName()), shared: shared}
	if cb := shared.policy.GetCircuitBreaker(); cb != nil {
		sp.Breaker = breakerOf(cb)
	}
	if bh := shared.policy.GetBulkhead(); bh != nil {
		sp.Bulkhead = bulkheadOf(bh)
	}
	if rl := shared.policy.GetRateLimit(); rl != nil {
		sp.RateLimit = rateLimitOf(rl)
	}
	if al := shared.policy.GetAdaptiveLimit(); al != nil {
		sp.AdaptiveLimit = adaptiveLimitOf(al, shared.policy.GetBulkhead())
	}
	if th := shared.policy.GetClientThrottle(); th != nil {
		sp.ClientThrottle = throttleOf(th)
	}
	retries := false
	for _, m := range s.Methods {
		mp := resolveMethod(m, filePolicy, svcPolicy)
		retries = retries || mp.Retry != nil
		sp.Methods = append(sp.Methods, mp)
	}
	sp.Server = resolveServer(sp, shared)
	// The budget exists only to bound retries; a service that never retries
	// has none, whatever its annotation says.
	if retries {
		sp.Budget = budgetOf(shared.policy.GetRetryBudget())
	}
	return sp
}

func resolveMethod(m *protogen.Method, filePolicy, svcPolicy *resilientv1.Policy) *methodPolicy {
	own := policyOf(m.Desc.Options(), resilientv1.E_Method)
	eff := mergeLayers(layer{levelFile, filePolicy}, layer{levelService, svcPolicy}, layer{levelMethod, own})

	p := eff.policy
	mp := &methodPolicy{
		Name:           fmt.Sprintf("/%s/%s", m.Parent.Desc.FullName(), m.Desc.Name()),
		Kind:           kindOf(m),
		Idempotent:     rules.Idempotent(m.Desc, eff.rules),
		Timeout:        durationOf(p.GetTimeout(), 0),
		OverallTimeout: durationOf(p.GetOverallTimeout(), 0),
		eff:            eff,
	}
	// A streaming method takes the timeout, breaker and bulkhead of its
	// service, but neither retries nor an idempotency key: it ignores those
	// it inherits (and the rules refuse those written on it).
	if name := p.GetIdempotencyKey(); name != "" && streamKind(m) == "" {
		mp.IdempotencyKey = name
		mp.Key = keyFieldOf(m, name)
	}
	if rules.Retries(m.Desc, eff.rules) {
		mp.Retry = retryOf(p.GetRetry())
	}

	resolvePatterns(m, mp, own, eff)
	resolveServerMethod(mp, eff)

	// A method's own breaker or bulkhead (per_method) starts from the
	// shared settings (file and service) and overrides them with its own.
	if own.GetCircuitBreaker().GetPerMethod() {
		mp.Breaker = breakerOf(p.GetCircuitBreaker())
	}
	if own.GetBulkhead().GetPerMethod() {
		mp.Bulkhead = bulkheadOf(p.GetBulkhead())
	}
	if own.GetAdaptiveLimit().GetPerMethod() && streamKind(m) == "" {
		mp.AdaptiveLimit = adaptiveLimitOf(p.GetAdaptiveLimit(), p.GetBulkhead())
	}
	return mp
}

func kindOf(m *protogen.Method) string {
	switch {
	case m.Desc.IsStreamingClient() && m.Desc.IsStreamingServer():
		return "KindBidiStreaming"
	case m.Desc.IsStreamingClient():
		return "KindClientStreaming"
	case m.Desc.IsStreamingServer():
		return "KindServerStreaming"
	default:
		return "KindUnary"
	}
}

// streamKind describes a streaming method for messages ("a
// server-streaming method"); "" for unary.
func streamKind(m *protogen.Method) string { return rules.StreamKind(m.Desc) }

// keyFieldOf says how generated code reads the key field name of the
// request; nil when the request has no such key field (which the rules
// refuse).
func keyFieldOf(m *protogen.Method, name string) *keyField {
	for _, fl := range m.Input.Fields {
		if string(fl.Desc.Name()) == name {
			return scalarKey(fl)
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

// retryOf resolves a retry: the contract's defaults (rules.DefaultOf),
// then the merged options, field by field (rules.Fill).
func retryOf(r *resilientv1.Retry) *retryPolicy {
	rp := &retryPolicy{}
	fill(rp, "retry", r)
	return rp
}

func budgetOf(b *resilientv1.RetryBudget) *budgetPolicy {
	bp := &budgetPolicy{}
	fill(bp, "retry_budget", b)
	return bp
}

func breakerOf(cb *resilientv1.CircuitBreaker) *breakerPolicy {
	bp := &breakerPolicy{}
	fill(bp, "circuit_breaker", cb)
	return bp
}

// bulkheadOf resolves a bulkhead; its permits are required (the rules).
func bulkheadOf(bh *resilientv1.Bulkhead) *bulkheadPolicy {
	bp := &bulkheadPolicy{}
	fill(bp, "bulkhead", bh)
	return bp
}

// fill resolves one group of the options into dst, a policy of the
// generated literal: the contract's defaults of the group, then the
// options. The options are checked (rules.Check), and every field has its
// place in dst (TestEveryOptionFieldIsWired), so that nothing fails here.
func fill[M proto.Message](dst any, group string, options M) {
	if err := rules.Fill(dst, rules.DefaultOf(group)); err != nil {
		panic(err) // the contract's own defaults fit the plugin's types
	}
	if err := rules.Fill(dst, options); err != nil {
		panic(err) // a field of the options without its place in the plugin's types: a test fails first
	}
}
