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
)

// categoryID groups the rules, so that buf.yaml can use them all at once.
const categoryID = "RESILIENT"

// spec is the plugin: one lint rule per rule of internal/rules.
var spec = &check.Spec{
	Rules: []*check.RuleSpec{
		ruleSpec(rules.RuleInvalidValue, true, "Checks that every (resilient.v1.*) value is one the contract allows (ratios, durations, status codes, levels)."),
		ruleSpec(rules.RuleRetryNotIdempotent, true, "Checks that only idempotent or keyed methods are retried."),
		ruleSpec(rules.RuleTimeoutExceedsOverall, true, "Checks that no per-attempt timeout is longer than the overall timeout of the call."),
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
			rules.CheckFile(f.ProtoreflectFileDescriptor(), func(d protoreflect.Descriptor, fi rules.Finding) {
				if fi.Rule != id {
					return
				}
				w.AddAnnotation(check.WithDescriptor(d), check.WithMessagef("%s: %s.%s: %s", d.FullName(), fi.Level.Option(), fi.Path, fi.Message))
			})
			return nil
		}, checkutil.WithoutImports()),
	}
}
