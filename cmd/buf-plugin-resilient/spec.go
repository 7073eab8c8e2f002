// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"

	"buf.build/go/bufplugin/check"
	"buf.build/go/bufplugin/check/checkutil"
	"buf.build/go/bufplugin/descriptor"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// categoryID groups the rules, so that buf.yaml can use them all at once.
const categoryID = "RESILIENT"

// spec is the plugin: one lint rule per rule of internal/rules, each
// reporting the findings of rules.CheckFile that carry its ID.
var spec = &check.Spec{
	Rules: []*check.RuleSpec{
		ruleSpec(rules.RuleInvalidValue, true, "Checks that every (resilient.v1.*) value is one the contract allows (ratios, durations, status codes, levels)."),
		ruleSpec(rules.RuleRetryNotIdempotent, true, "Checks that only idempotent or keyed methods are retried."),
		ruleSpec(rules.RuleTimeoutExceedsOverall, true, "Checks that no per-attempt timeout is longer than the overall timeout of the call."),
		ruleSpec(rules.RuleMissingValue, true, "Checks that every setting without a default (bulkhead permits, rate, hedging delay, cache TTL and key fields, dedup TTL, shedding limits) is set."),
		ruleSpec(rules.RuleKeyField, true, "Checks that an idempotency key names a singular string, bytes or integer field of the request, and only on unary methods."),
		ruleSpec(rules.RuleIdempotencyContradiction, true, "Checks that idempotent agrees with idempotency_level, and that idempotency_key and generate_idempotency_key are not both in force."),
		ruleSpec(rules.RuleStreamRetry, true, "Checks that no streaming method is given retries."),
		ruleSpec(rules.RuleBackoffOrder, true, "Checks that max_backoff is not shorter than initial_backoff, across levels and defaults."),
		ruleSpec(rules.RuleScope, true, "Checks that a method's own circuit_breaker, bulkhead, rate_limit and adaptive_limit set per_method, that streams are not rate limited, and that a (resilient.v1.file) option is written only in a file that declares a service."),
		ruleSpec(rules.RuleHedging, true, "Checks that only idempotent unary methods that do not retry are hedged, with a delay shorter than their timeouts."),
		ruleSpec(rules.RuleCache, true, "Checks that only idempotent unary methods with a timeout are cached, keyed by singular string, bytes or integer fields."),
		ruleSpec(rules.RuleAdaptive, true, "Checks that an adaptive_limit's bounds fit together and under the bulkhead's permits, that it applies to unary methods with a timeout, and that a count-based breaker window holds minimum_calls."),
		ruleSpec(rules.RuleServer, true, "Checks the server side: default_timeout against min_deadline, deduplication only of keyed unary requests, shedding limits in order."),
		ruleSpec(rules.RuleNoTimeout, false, "Checks that every method has a timeout or an overall_timeout."),
	},
	Categories: []*check.CategorySpec{
		{ID: categoryID, Purpose: "Checks the resilience policy annotated with (resilient.v1.*) options, as protoc-gen-go-resilient does."},
	},
}

func ruleSpec(id string, byDefault bool, purpose string) *check.RuleSpec {
	return &check.RuleSpec{
		ID:          id,
		CategoryIDs: []string{categoryID},
		Default:     byDefault,
		Purpose:     purpose,
		Type:        check.RuleTypeLint,
		Handler: checkutil.NewFileRuleHandler(func(_ context.Context, w check.ResponseWriter, _ check.Request, f descriptor.FileDescriptor) error {
			report := func(d protoreflect.Descriptor, fi rules.Finding) {
				if fi.Rule != id {
					return
				}
				w.AddAnnotation(place(d, fi), check.WithMessagef("%s: %s: %s", d.FullName(), fi.Level.OptionPath(fi.Path), fi.Message))
			}
			rules.CheckFile(f.ProtoreflectFileDescriptor(), report)
			newerOptions(f.ProtoreflectFileDescriptor(), report)      // newer.go
			unreadableOptions(f.ProtoreflectFileDescriptor(), report) // readable.go
			return nil
		}, checkutil.WithoutImports()),
	}
}

// fileOptionPath is the source path of a file's (resilient.v1.file)
// option: the file's options, then the extension.
var fileOptionPath = append(rules.OptionsPath(rules.LevelFile, 0, 0), int32(resilientv1.E_File.TypeDescriptor().Number()))

// place is where fi, found at d, is reported: a finding of the file's own
// option at that option's statement, when the file has its source
// location; for an option written field by field (option
// (resilient.v1.file).timeout = {...}), which has no statement of the
// whole option, at the statement of the field at fault, as the code
// generator places it (rules.ValueLocation); anything else at the
// descriptor's span (a file has none, so buf names only the file).
func place(d protoreflect.Descriptor, fi rules.Finding) check.AddAnnotationOption {
	if fd, ok := d.(protoreflect.FileDescriptor); ok && fi.Level == rules.LevelFile {
		locs := fd.SourceLocations()
		if loc := locs.ByPath(fileOptionPath); loc.Path != nil {
			return check.WithFileNameAndSourcePath(fd.Path(), fileOptionPath)
		}
		if loc, ok := rules.ValueLocation(locs, fileOptionPath, fi.Path); ok {
			return check.WithFileNameAndSourcePath(fd.Path(), loc.Path)
		}
	}
	return check.WithDescriptor(d)
}
