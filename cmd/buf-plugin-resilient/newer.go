// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// newerOptions reports, as RESILIENT_INVALID_VALUE, each (resilient.v1.*)
// value of fd that this lint plugin cannot check because the options proto
// fd imports is newer than it (rules.NewerOptions): a field of the Policy
// message, or a resilient.v1 extension, that the lint plugin's contract
// lacks. The code generator refuses the same values (its skew check);
// without this, lint would pass what generation refuses, the value
// unchecked.
func newerOptions(fd protoreflect.FileDescriptor, add func(protoreflect.Descriptor, rules.Finding)) {
	rules.NewerOptions(fd, func(d protoreflect.Descriptor, n rules.NewerOption) {
		msg := newerLintMessage(n.What)
		if n.Retyped {
			msg = retypedLintMessage(n)
		}
		add(d, rules.Finding{Rule: rules.RuleInvalidValue, Level: n.Level, Path: n.Path, Message: msg})
	})
}

// retypedLintMessage says what a field whose type differs between the
// options proto and the lint plugin's contract means (n.Retyped), and how
// to mend it.
func retypedLintMessage(n rules.NewerOption) string {
	return "the options proto (resilient/v1/resilient.proto) differs from the one of this lint plugin: " + n.What + ", where this lint plugin expects " + n.Expected() +
		", so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and " + n.Name + " as " + n.Expects +
		", or install the lint plugin of the version the options proto came from (go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION)"
}

// newerLintMessage says what an option of a newer contract means to lint
// and how to mend it.
func newerLintMessage(what string) string {
	return "the options proto (resilient/v1/resilient.proto) is newer than this lint plugin, and " + what +
		", so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): install the lint plugin of the version the options proto came from " +
		"(go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION), " +
		"or write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and do not use the field"
}
