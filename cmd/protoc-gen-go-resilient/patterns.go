// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// resolvePatterns resolves hedging, the method's own rate limit, the cache
// and generated idempotency keys of one method, once its idempotency,
// retries and timeouts are known. The rules check them (rules.CheckMethod).
func resolvePatterns(m *protogen.Method, rm *method, own *resilientv1.Policy, eff rules.Merged) {
	p, mp := eff.Policy, rm.Policy
	unary := streamKind(m) == ""

	// A generated key replaces none named; a stream ignores what its
	// service or file sets for unary calls.
	mp.GenerateIdempotencyKey = p.GetGenerateIdempotencyKey() && unary && mp.IdempotencyKey == ""

	// Hedging, written on the method.
	if h := p.GetHedging(); h != nil && eff.SetBy["hedging"] == rules.LevelMethod {
		mp.Hedging = resolved[policy.Hedging]("hedging", h)
	}

	// The method's own rate limit (per_method), from the shared settings
	// overridden by its own.
	if own.GetRateLimit().GetPerMethod() && unary {
		mp.RateLimit = rateLimitOf(p.GetRateLimit())
	}

	// The cache, written on the method.
	if ca := p.GetCache(); ca != nil && eff.SetBy["cache"] == rules.LevelMethod {
		mp.Cache = resolved[policy.Cache]("cache", ca)
		// No stale_ttl means no stale answers: stale as long as fresh.
		rules.Follow(mp.Cache, nil, "cache", rules.SetIn(ca))
		for _, f := range mp.Cache.KeyFields {
			rm.CacheKeys = append(rm.CacheKeys, cacheKeyOf(m, f))
		}
	}
}

// rateLimitOf resolves a rate limit; its rate is required (the rules).
func rateLimitOf(r *resilientv1.RateLimit) *policy.RateLimit {
	rp := resolved[policy.RateLimit]("rate_limit", r)
	rules.Follow(rp, nil, "rate_limit", rules.SetIn(r)) // the burst, from the rate
	return rp
}

// cacheKeyOf says how generated code reads the cache key field name of the
// request, telling set from unset when the field has presence; nil when
// the request has no such key field (which the rules refuse).
func cacheKeyOf(m *protogen.Method, name string) *keyField {
	fl := fieldOf(m, name)
	if fl == nil {
		return nil
	}
	k := scalarKey(fl)
	if k != nil && fl.Desc.HasPresence() {
		k.Presence = presenceOf(fl)
	}
	return k
}

// PresenceVars lists the local variables of the generated cache key
// function that hold the parts of its key fields with presence,
// ["accountPart", "dayPart"]; none for none. The template names each
// apart from the file's imports (local), as every other local: a request
// of a package imported as keyPart would otherwise have its oneof wrapper
// types hidden by the part of a field key.
func (m *method) PresenceVars() []string {
	var vars []string
	for _, k := range m.CacheKeys {
		if k != nil && k.Presence != nil {
			vars = append(vars, k.Presence.Var)
		}
	}
	return vars
}

// presenceOf says how generated code tells field, which has presence, set.
func presenceOf(field *protogen.Field) *presence {
	p := &presence{Var: strings.ToLower(field.GoName[:1]) + field.GoName[1:] + "Part"}
	if has, _ := field.MethodName("Has"); has != "" {
		p.Has = has
	} else if o := field.Oneof; o != nil && !o.Desc.IsSynthetic() {
		p.Field, p.Wrapper = o.GoName, field.GoIdent
	} else {
		p.Field = field.GoName
	}
	return p
}

// scalarKey says how generated code reads a field as text, or nil when the
// field cannot be a key (rules.IsKeyField).
func scalarKey(field *protogen.Field) *keyField {
	fd := field.Desc
	if !rules.IsKeyField(fd) {
		return nil
	}
	getter, _ := field.MethodName("Get") // "Get" and the field's name, as the message's Go API has it
	k := &keyField{Getter: getter}
	switch fd.Kind() {
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
	}
	return k
}
