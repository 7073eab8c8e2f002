// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// The defaults of the options contract (options/resilient/v1/resilient.proto),
// filled into the generated literals so that a reader of the generated code
// sees every value in force. They and the checks of each option live in
// internal/rules, shared with the override loader.
const (
	defaultMaxAttempts    = rules.DefaultMaxAttempts
	defaultInitialBackoff = rules.DefaultInitialBackoff
	defaultMaxBackoff     = rules.DefaultMaxBackoff
	defaultMultiplier     = rules.DefaultMultiplier

	defaultBudgetRatio      = rules.DefaultBudgetRatio
	defaultBudgetMinRetries = rules.DefaultBudgetMinRetries
	defaultBudgetWindow     = rules.DefaultBudgetWindow

	defaultFailureRatio   = rules.DefaultFailureRatio
	defaultMinimumCalls   = rules.DefaultMinimumCalls
	defaultBreakerWindow  = rules.DefaultBreakerWindow
	defaultCoolDown       = rules.DefaultCoolDown
	defaultHalfOpenProbes = rules.DefaultHalfOpenProbes
)

var (
	defaultRetryableCodes = rules.DefaultRetryableCodes
	defaultFailureCodes   = rules.DefaultFailureCodes
)

// The resolved policy: what the generated literals hold. These mirror the
// runtime's types, but keep status codes in the order they were written so
// that the generated code reads like the annotation.
type (
	servicePolicy struct {
		Name     string
		Budget   *budgetPolicy
		Breaker  *breakerPolicy
		Bulkhead *bulkheadPolicy
		// RateLimit is the token bucket the service's methods share.
		RateLimit *rateLimitPolicy
		Methods   []*methodPolicy
		// Server is the server-side policy, nil when the service and its
		// methods have no server-side annotation (server.go).
		Server *serverPolicy
	}
	methodPolicy struct {
		Name           string
		Kind           string // the name of the runtime.Kind constant
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
		// Priority is the name of the annotated runtime.Priority constant
		// ("PriorityHigh"), "" when no level sets a priority.
		Priority string
		// Server is the method's server-side policy (server.go).
		Server *serverMethodPolicy
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

// resolveFile resolves and checks the policy of every service of f, adding
// what is wrong to ps.
func resolveFile(f *protogen.File, ps *problems) []*servicePolicy {
	filePolicy := policyOf(f.Desc.Options(), resilientv1.E_File)
	checkPolicy(filePolicy, levelFile, fileSite(f), ps)
	var out []*servicePolicy
	for _, s := range f.Services {
		out = append(out, resolveService(f, s, filePolicy, ps))
	}
	return out
}

func resolveService(f *protogen.File, s *protogen.Service, filePolicy *resilientv1.Policy, ps *problems) *servicePolicy {
	at := serviceSite(f, s)
	svcPolicy := policyOf(s.Desc.Options(), resilientv1.E_Service)
	checkPolicy(svcPolicy, levelService, at, ps)

	shared := mergeLayers(layer{levelFile, filePolicy}, layer{levelService, svcPolicy})
	sp := &servicePolicy{Name: string(s.Desc.FullName())}
	if cb := shared.policy.GetCircuitBreaker(); cb != nil {
		sp.Breaker = breakerOf(cb)
	}
	if bh := shared.policy.GetBulkhead(); bh != nil {
		sp.Bulkhead = bulkheadOf(bh, shared, at, ps)
	}
	if rl := shared.policy.GetRateLimit(); rl != nil {
		sp.RateLimit = rateLimitOf(rl, shared, at, ps)
	}
	retries := false
	for _, m := range s.Methods {
		mp := resolveMethod(f, m, filePolicy, svcPolicy, ps)
		retries = retries || mp.Retry != nil
		sp.Methods = append(sp.Methods, mp)
	}
	sp.Server = resolveServer(sp, shared, at, ps)
	// The budget exists only to bound retries; a service that never retries
	// has none, whatever its annotation says.
	if retries {
		sp.Budget = budgetOf(shared.policy.GetRetryBudget())
	}
	return sp
}

func resolveMethod(f *protogen.File, m *protogen.Method, filePolicy, svcPolicy *resilientv1.Policy, ps *problems) *methodPolicy {
	at := methodSite(f, m)
	own := policyOf(m.Desc.Options(), resilientv1.E_Method)
	checkPolicy(own, levelMethod, at, ps)
	eff := mergeLayers(layer{levelFile, filePolicy}, layer{levelService, svcPolicy}, layer{levelMethod, own})
	p := eff.policy
	mp := &methodPolicy{
		Name: fmt.Sprintf("/%s/%s", m.Parent.Desc.FullName(), m.Desc.Name()),
		Kind: kindOf(m),
	}

	// Idempotency: the project's flag or protobuf's own idempotency_level.
	idemLevel := descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	if mo, ok := m.Desc.Options().(*descriptorpb.MethodOptions); ok {
		idemLevel = mo.GetIdempotencyLevel()
	}
	declared := idemLevel == descriptorpb.MethodOptions_IDEMPOTENT || idemLevel == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	if own != nil && own.Idempotent != nil && !own.GetIdempotent() && declared {
		ps.add(at, levelMethod, "idempotent", "false contradicts option idempotency_level = %s on the same method: remove one of the two", idemLevel)
	}
	mp.Idempotent = p.GetIdempotent() || declared

	// A streaming method takes the timeout, breaker and bulkhead of its
	// service, but neither retries nor an idempotency key: it ignores those
	// it inherits and refuses those written on it.
	if kind := streamKind(m); kind != "" {
		if own.GetRetry() != nil {
			ps.add(at, levelMethod, "retry", "streams are not retried, and %s is %s: remove retry (opening the stream still gets the timeout, breaker and bulkhead)", m.Desc.Name(), kind)
		}
		if own.GetIdempotencyKey() != "" {
			ps.add(at, levelMethod, "idempotency_key", "only unary calls send an idempotency key, and %s is %s: remove it", m.Desc.Name(), kind)
		}
	} else {
		if name := p.GetIdempotencyKey(); name != "" {
			mp.Key = keyFieldOf(m, name, at, eff.setBy["idempotency_key"], ps)
			mp.IdempotencyKey = name
		}
		if r := p.GetRetry(); r != nil {
			rp := retryOf(r)
			if rp.MaxAttempts > 1 {
				mp.Retry = rp
				rules.CheckRetrySafe(string(m.Desc.Name()), mp.Idempotent, mp.IdempotencyKey != "" || p.GetGenerateIdempotencyKey(), eff.rules, ps.report(at))
				checkBackoff(rp, eff, at, ps)
			}
		}
	}

	mp.Timeout = durationOf(p.GetTimeout(), 0)
	mp.OverallTimeout = durationOf(p.GetOverallTimeout(), 0)
	rules.CheckTimeouts(mp.Timeout, mp.OverallTimeout, eff.rules, ps.report(at))

	resolvePatterns(m, mp, own, eff, at, ps)
	resolveServerMethod(m, mp, eff, at, ps)

	// A method's own breaker or bulkhead starts from the shared settings
	// (file and service) and overrides them with its own.
	if own.GetCircuitBreaker() != nil {
		if !own.GetCircuitBreaker().GetPerMethod() {
			ps.add(at, levelMethod, "circuit_breaker", "a method's own circuit_breaker needs per_method: true, which gives the method a breaker of its own; to tune the breaker the service's methods share, move these settings to (resilient.v1.service)")
		} else {
			mp.Breaker = breakerOf(p.GetCircuitBreaker())
		}
	}
	if own.GetBulkhead() != nil {
		if !own.GetBulkhead().GetPerMethod() {
			ps.add(at, levelMethod, "bulkhead", "a method's own bulkhead needs per_method: true, which gives the method a bulkhead of its own; to tune the bulkhead the service's methods share, move these settings to (resilient.v1.service)")
		} else {
			mp.Bulkhead = bulkheadOf(p.GetBulkhead(), eff, at, ps)
		}
	}
	return mp
}

// origin says where the other value of a comparison comes from when that
// is not the option being blamed.
func origin(m merged, path string, blamed level) string {
	lvl, ok := m.setBy[path]
	switch {
	case !ok:
		return " (the default)"
	case lvl != blamed:
		return " (set in " + lvl.option() + ")"
	default:
		return ""
	}
}

// checkBackoff refuses a max_backoff below initial_backoff, once defaults
// are filled in, blaming the more specific of the two settings.
func checkBackoff(rp *retryPolicy, eff merged, at site, ps *problems) {
	if rp.InitialBackoff <= 0 || rp.MaxBackoff <= 0 || rp.MaxBackoff >= rp.InitialBackoff {
		return
	}
	il, iok := eff.setBy["retry.initial_backoff"]
	ml, mok := eff.setBy["retry.max_backoff"]
	if iok && (!mok || il > ml) {
		ps.add(at, il, "retry.initial_backoff", "%v is longer than max_backoff %v%s: lower initial_backoff or raise max_backoff",
			rp.InitialBackoff, rp.MaxBackoff, origin(eff, "retry.max_backoff", il))
		return
	}
	ps.add(at, ml, "retry.max_backoff", "%v is shorter than initial_backoff %v%s: raise max_backoff or lower initial_backoff",
		rp.MaxBackoff, rp.InitialBackoff, origin(eff, "retry.initial_backoff", ml))
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

// streamKind describes a streaming method for messages; "" for unary.
func streamKind(m *protogen.Method) string {
	switch {
	case m.Desc.IsStreamingClient() && m.Desc.IsStreamingServer():
		return "a bidi-streaming method"
	case m.Desc.IsStreamingClient():
		return "a client-streaming method"
	case m.Desc.IsStreamingServer():
		return "a server-streaming method"
	default:
		return ""
	}
}

// keyFieldOf finds the idempotency key field of the request and says how to
// read it, or reports why it cannot be a key.
func keyFieldOf(m *protogen.Method, name string, at site, lvl level, ps *problems) *keyField {
	msg := m.Input
	var field *protogen.Field
	for _, fl := range msg.Fields {
		if string(fl.Desc.Name()) == name {
			field = fl
		}
	}
	if field == nil {
		hint := ""
		for _, fl := range msg.Fields {
			if fl.Desc.JSONName() == name || strings.EqualFold(string(fl.Desc.Name()), name) {
				hint = fmt.Sprintf(" (did you mean %q?)", fl.Desc.Name())
			}
		}
		ps.add(at, lvl, "idempotency_key", "field %q does not exist in %s%s: name a top-level string, bytes or integer field of the request", name, msg.Desc.FullName(), hint)
		return nil
	}
	fd := field.Desc
	k := scalarKey(field)
	ok := k != nil
	if !ok {
		ps.add(at, lvl, "idempotency_key", "field %q of %s is %s: an idempotency key must be a singular string, bytes or integer field", name, msg.Desc.FullName(), describeField(fd))
		return nil
	}
	return k
}

func describeField(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "a map"
	case fd.IsList():
		return "a repeated " + describeKind(fd) + " field"
	case fd.Kind() == protoreflect.EnumKind:
		return "an " + describeKind(fd)
	default:
		return "a " + describeKind(fd)
	}
}

func describeKind(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.Message() != nil:
		return "message (" + string(fd.Message().FullName()) + ")"
	case fd.Enum() != nil:
		return "enum (" + string(fd.Enum().FullName()) + ")"
	default:
		return fd.Kind().String()
	}
}

// durationOf converts a checked Duration; nil gives def.
func durationOf(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}

func retryOf(r *resilientv1.Retry) *retryPolicy {
	rp := &retryPolicy{
		MaxAttempts:    defaultMaxAttempts,
		InitialBackoff: durationOf(r.GetInitialBackoff(), defaultInitialBackoff),
		MaxBackoff:     durationOf(r.GetMaxBackoff(), defaultMaxBackoff),
		Multiplier:     defaultMultiplier,
		RetryableCodes: codesOf(r.GetRetryableCodes(), defaultRetryableCodes),
	}
	if r.MaxAttempts != nil {
		rp.MaxAttempts = int(r.GetMaxAttempts())
	}
	if r.BackoffMultiplier != nil {
		rp.Multiplier = r.GetBackoffMultiplier()
	}
	return rp
}

func budgetOf(b *resilientv1.RetryBudget) *budgetPolicy {
	bp := &budgetPolicy{
		Ratio:      defaultBudgetRatio,
		MinRetries: defaultBudgetMinRetries,
		Window:     durationOf(b.GetWindow(), defaultBudgetWindow),
	}
	if b == nil {
		return bp
	}
	if b.Ratio != nil {
		bp.Ratio = b.GetRatio()
	}
	if b.MinRetries != nil {
		bp.MinRetries = int(b.GetMinRetries())
	}
	return bp
}

func breakerOf(cb *resilientv1.CircuitBreaker) *breakerPolicy {
	bp := &breakerPolicy{
		FailureRatio:      defaultFailureRatio,
		MinimumCalls:      defaultMinimumCalls,
		Window:            durationOf(cb.GetWindow(), defaultBreakerWindow),
		CoolDown:          durationOf(cb.GetCoolDown(), defaultCoolDown),
		HalfOpenProbes:    defaultHalfOpenProbes,
		SlowCallThreshold: durationOf(cb.GetSlowCallThreshold(), 0),
		FailureCodes:      codesOf(cb.GetFailureCodes(), defaultFailureCodes),
	}
	if cb.FailureRatio != nil {
		bp.FailureRatio = cb.GetFailureRatio()
	}
	if cb.MinimumCalls != nil {
		bp.MinimumCalls = int(cb.GetMinimumCalls())
	}
	if cb.HalfOpenProbes != nil {
		bp.HalfOpenProbes = int(cb.GetHalfOpenProbes())
	}
	return bp
}

// bulkheadOf resolves a bulkhead, refusing one without permits: there is no
// sensible default for the size of a bulkhead.
func bulkheadOf(bh *resilientv1.Bulkhead, m merged, at site, ps *problems) *bulkheadPolicy {
	if bh.Permits == nil {
		ps.add(at, m.setBy["bulkhead"], "bulkhead.permits", "is required: set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}")
	}
	return &bulkheadPolicy{Permits: int(bh.GetPermits()), MaxWait: durationOf(bh.GetMaxWait(), 0)}
}

// codesOf parses checked code names, dropping repeats; none gives def.
func codesOf(names []string, def []codes.Code) []codes.Code { return rules.CodesOf(names, def) }

// checkPolicy checks the values written in one option (internal/rules),
// reporting each problem at the option's place.
func checkPolicy(p *resilientv1.Policy, lvl level, at site, ps *problems) {
	rules.Check(p, lvl == levelMethod, func(path, format string, args ...any) {
		ps.add(at, lvl, path, format, args...)
	})
}
