// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/check"
)

// CheckCache checks the cache of a method, written on it (elsewhere Check
// refuses it): it needs fresh_ttl and key_fields; it caches idempotent
// unary calls only, which have a timeout (the call shared by the callers
// of a key runs detached from them); and every key field is a top-level
// key field (IsKeyField) of the request.
func CheckCache(m protoreflect.MethodDescriptor, eff Merged, add func(Finding)) {
	ca := eff.Policy.GetCache()
	if ca == nil || eff.SetBy["cache"] != LevelMethod {
		return
	}
	name, kind := m.Name(), StreamKind(m)
	if ca.FreshTtl == nil {
		add(Finding{RuleMissingValue, LevelMethod, "cache.fresh_ttl",
			"is required: set how long an answer is served without calling, as in cache: {fresh_ttl: {seconds: 1}}"})
	}
	if msg := check.StreamCache(string(name), kind); msg != "" {
		add(Finding{RuleCache, LevelMethod, "cache", msg + ": remove cache"})
	} else if msg := check.CacheIdempotent(string(name), Idempotent(m, eff)); msg != "" {
		add(Finding{RuleCache, LevelMethod, "cache",
			msg + "; mark the method idempotent (option idempotency_level = NO_SIDE_EFFECTS) if it is a read, or remove cache"})
	}
	if msg := check.CacheTimeout(string(name), eff.Policy.GetTimeout().AsDuration(), eff.Policy.GetOverallTimeout().AsDuration()).Options(); kind == "" && msg != "" {
		add(Finding{RuleCache, LevelMethod, "cache", msg})
	}
	if len(ca.GetKeyFields()) == 0 {
		add(Finding{RuleMissingValue, LevelMethod, "cache.key_fields",
			`is required: name the request fields whose values make the cache key, as in cache: {key_fields: ["sku"]}`})
	}
	msg := m.Input()
	for i, f := range ca.GetKeyFields() {
		path := fmt.Sprintf("cache.key_fields[%d]", i)
		switch fd := msg.Fields().ByName(protoreflect.Name(f)); {
		case fd == nil:
			add(Finding{RuleCache, LevelMethod, path,
				fmt.Sprintf("field %q does not exist in %s%s: name top-level string, bytes or integer fields of the request", f, msg.FullName(), didYouMean(msg, f))})
		case !IsKeyField(fd):
			add(Finding{RuleCache, LevelMethod, path,
				fmt.Sprintf("field %q of %s is %s: a cache key field must be a singular string, bytes or integer field", f, msg.FullName(), describeField(fd))})
		}
	}
}
