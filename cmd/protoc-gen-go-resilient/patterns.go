// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// The resolved policies of the patterns beyond timeouts, retries, breakers
// and bulkheads: hedging, the client's rate limit and the cache.
type (
	hedgingPolicy struct {
		Delay         time.Duration
		MaxCopies     int
		NonFatalCodes []codes.Code
	}
	rateLimitPolicy struct {
		RequestsPerSecond float64
		Burst             int
		MaxWait           time.Duration
	}
	cachePolicy struct {
		FreshTTL   time.Duration
		StaleTTL   time.Duration
		MaxEntries int
		KeyFields  []string
		// Keys read the key fields from the request, in order.
		Keys []*keyField
	}
)

// resolvePatterns resolves and checks hedging, the method's own rate
// limit, the cache and generated idempotency keys of one method, once its
// idempotency, retries and timeouts are known.
func resolvePatterns(m *protogen.Method, mp *methodPolicy, own *resilientv1.Policy, eff merged, at site, ps *problems) {
	p := eff.policy
	stream := streamKind(m)

	// Generated idempotency keys.
	if p.GetGenerateIdempotencyKey() {
		switch {
		case stream != "" && own.GetGenerateIdempotencyKey():
			ps.add(at, levelMethod, "generate_idempotency_key", "only unary calls send an idempotency key, and %s is %s: remove it", m.Desc.Name(), stream)
		case stream != "":
			// A stream ignores what its service or file sets for unary calls.
		case mp.IdempotencyKey != "":
			kl, gl := eff.setBy["idempotency_key"], eff.setBy["generate_idempotency_key"]
			switch { // the same level is refused by the rules already
			case kl > gl:
				ps.add(at, kl, "idempotency_key", "%s names its field %q as the idempotency key while %s sets generate_idempotency_key: keep one; to send the field, add generate_idempotency_key: false beside idempotency_key",
					m.Desc.Name(), mp.IdempotencyKey, gl.option())
			case gl > kl:
				ps.add(at, gl, "generate_idempotency_key", "%s already sends its field %q as the idempotency key (idempotency_key set in %s): remove generate_idempotency_key",
					m.Desc.Name(), mp.IdempotencyKey, kl.option())
			}
		default:
			mp.GenerateIdempotencyKey = true
		}
	}

	// Hedging.
	if h := p.GetHedging(); h != nil && eff.setBy["hedging"] == levelMethod {
		hp := &hedgingPolicy{
			Delay:         durationOf(h.GetDelay(), 0),
			MaxCopies:     rules.DefaultHedgingMaxCopies,
			NonFatalCodes: codesOf(h.GetNonFatalCodes(), rules.DefaultNonFatalCodes),
		}
		if h.MaxCopies != nil {
			hp.MaxCopies = int(h.GetMaxCopies())
		}
		name := m.Desc.Name()
		ok := true
		if h.Delay == nil {
			ps.add(at, levelMethod, "hedging.delay", "is required: set how long to wait for an answer before sending the next copy, about the method's observed p95, as in hedging: {delay: {nanos: 80000000}}")
			ok = false
		}
		if stream != "" {
			ps.add(at, levelMethod, "hedging", "streams are not hedged, and %s is %s: remove hedging", name, stream)
			ok = false
		} else if !mp.Idempotent {
			ps.add(at, levelMethod, "hedging", "%s is not idempotent, and hedged copies run at the same time, so each could apply it: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT) if it is, or remove hedging", name)
			ok = false
		}
		if mp.Retry != nil {
			ps.add(at, levelMethod, "hedging", "%s also retries%s: a method hedges or retries, not both, since hedged copies already repeat the call; remove one, or turn retries off for it with retry: {max_attempts: 1}",
				name, origin(eff, "retry", levelMethod))
			ok = false
		}
		if hp.Delay > 0 && mp.Timeout > 0 && hp.Delay >= mp.Timeout {
			ps.add(at, levelMethod, "hedging.delay", "%v is not shorter than timeout %v%s: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout",
				hp.Delay, mp.Timeout, origin(eff, "timeout", levelMethod))
			ok = false
		} else if hp.Delay > 0 && mp.OverallTimeout > 0 && hp.Delay >= mp.OverallTimeout {
			ps.add(at, levelMethod, "hedging.delay", "%v is not shorter than overall_timeout %v%s: no copy could be sent before the call ends; shorten the delay (about the p95)",
				hp.Delay, mp.OverallTimeout, origin(eff, "overall_timeout", levelMethod))
			ok = false
		}
		if ok {
			mp.Hedging = hp
		}
	}

	// The method's own rate limit.
	if r := own.GetRateLimit(); r != nil {
		switch {
		case !r.GetPerMethod():
			ps.add(at, levelMethod, "rate_limit", "a method's own rate_limit needs per_method: true, which gives the method a token bucket of its own; to tune the limit the service's methods share, move these settings to (resilient.v1.service)")
		case stream != "":
			ps.add(at, levelMethod, "rate_limit", "only unary calls are rate limited, and %s is %s: remove it", m.Desc.Name(), stream)
		default:
			mp.RateLimit = rateLimitOf(p.GetRateLimit(), eff, at, ps)
		}
	}

	// The cache.
	if ca := p.GetCache(); ca != nil && eff.setBy["cache"] == levelMethod {
		cp := &cachePolicy{
			FreshTTL:   durationOf(ca.GetFreshTtl(), 0),
			MaxEntries: rules.DefaultCacheMaxEntries,
			KeyFields:  ca.GetKeyFields(),
		}
		cp.StaleTTL = durationOf(ca.GetStaleTtl(), cp.FreshTTL)
		if ca.MaxEntries != nil {
			cp.MaxEntries = int(ca.GetMaxEntries())
		}
		name := m.Desc.Name()
		ok := true
		if ca.FreshTtl == nil {
			ps.add(at, levelMethod, "cache.fresh_ttl", "is required: set how long an answer is served without calling, as in cache: {fresh_ttl: {seconds: 1}}")
			ok = false
		} else if ca.StaleTtl == nil && cp.FreshTTL > 0 {
			cp.StaleTTL = cp.FreshTTL
		}
		if stream != "" {
			ps.add(at, levelMethod, "cache", "streams are not cached, and %s is %s: remove cache", name, stream)
			ok = false
		} else if !mp.Idempotent {
			ps.add(at, levelMethod, "cache", "%s is not idempotent: only reads are cached, since a cached answer means the call is not made; mark the method idempotent (option idempotency_level = NO_SIDE_EFFECTS) if it is a read, or remove cache", name)
			ok = false
		}
		if stream == "" && mp.Timeout == 0 && mp.OverallTimeout == 0 {
			ps.add(at, levelMethod, "cache", "%s has neither timeout nor overall_timeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set timeout or overall_timeout", name)
			ok = false
		}
		if len(cp.KeyFields) == 0 {
			ps.add(at, levelMethod, "cache.key_fields", `is required: name the request fields whose values make the cache key, as in cache: {key_fields: ["sku"]}`)
			ok = false
		}
		for i, f := range cp.KeyFields {
			k := cacheKeyFieldOf(m, f, fmt.Sprintf("cache.key_fields[%d]", i), at, ps)
			if k == nil {
				ok = false
			}
			cp.Keys = append(cp.Keys, k)
		}
		if ok {
			mp.Cache = cp
		}
	}
}

// rateLimitOf resolves a rate limit, refusing one without a rate: there is
// no sensible default.
func rateLimitOf(r *resilientv1.RateLimit, m merged, at site, ps *problems) *rateLimitPolicy {
	rp := &rateLimitPolicy{RequestsPerSecond: r.GetRequestsPerSecond(), MaxWait: durationOf(r.GetMaxWait(), 0)}
	if r.RequestsPerSecond == nil {
		ps.add(at, m.setBy["rate_limit"], "rate_limit.requests_per_second", "is required: set the sustained rate of calls allowed, as in rate_limit: {requests_per_second: 200}")
	}
	if r.Burst != nil {
		rp.Burst = int(r.GetBurst())
	} else if x := rp.RequestsPerSecond; x > 0 && !math.IsInf(x, 0) {
		rp.Burst = int(min(math.Ceil(x), math.MaxInt32))
	}
	rp.Burst = max(rp.Burst, 1)
	return rp
}

// cacheKeyFieldOf finds a cache key field of the request and says how to
// read it, or reports why it cannot be part of a key.
func cacheKeyFieldOf(m *protogen.Method, name, path string, at site, ps *problems) *keyField {
	msg := m.Input
	for _, fl := range msg.Fields {
		if string(fl.Desc.Name()) != name {
			continue
		}
		if k := scalarKey(fl); k != nil {
			return k
		}
		ps.add(at, levelMethod, path, "field %q of %s is %s: a cache key field must be a singular string, bytes or integer field", name, msg.Desc.FullName(), describeField(fl.Desc))
		return nil
	}
	hint := ""
	for _, fl := range msg.Fields {
		if fl.Desc.JSONName() == name || strings.EqualFold(string(fl.Desc.Name()), name) {
			hint = fmt.Sprintf(" (did you mean %q?)", fl.Desc.Name())
		}
	}
	ps.add(at, levelMethod, path, "field %q does not exist in %s%s: name top-level string, bytes or integer fields of the request", name, msg.Desc.FullName(), hint)
	return nil
}

// scalarKey says how generated code reads a field as text, or nil when the
// field is not a singular string, bytes or integer.
func scalarKey(field *protogen.Field) *keyField {
	fd := field.Desc
	if fd.IsList() || fd.IsMap() {
		return nil
	}
	k := &keyField{Getter: "Get" + field.GoName}
	switch fd.Kind() {
	case protoreflect.StringKind:
	case protoreflect.BytesKind:
		k.Func = "KeyFromBytes"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		k.Func = "KeyFromInt"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		k.Func, k.Conv = "KeyFromInt", "int64"
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		k.Func = "KeyFromUint"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		k.Func, k.Conv = "KeyFromUint", "uint64"
	default:
		return nil
	}
	return k
}
