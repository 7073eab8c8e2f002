// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"buf.build/go/bufplugin/check/checktest"

	"github.com/go-resilient/resilient/internal/rules"
)

func TestSpec(t *testing.T) {
	checktest.SpecTest(t, spec)
}

func request(ruleIDs ...string) *checktest.RequestSpec {
	return &checktest.RequestSpec{
		Files: &checktest.ProtoFileSpec{
			DirPaths:  []string{"testdata", "../../options"},
			FilePaths: []string{"lint/lint.proto"},
		},
		RuleIDs: ruleIDs,
	}
}

func at(line, col, endLine, endCol int) *checktest.ExpectedFileLocation {
	return &checktest.ExpectedFileLocation{FileName: "lint/lint.proto", StartLine: line, StartColumn: col, EndLine: endLine, EndColumn: endCol}
}

// The messages are the plugin's refusals (internal/rules), prefixed with
// the descriptor and the option.
var (
	invalidValue = checktest.ExpectedAnnotation{
		RuleID:       rules.RuleInvalidValue,
		Message:      "lint.v1.Orders: (resilient.v1.service).circuit_breaker.failure_ratio: must be in (0, 1], got 2; remove it for the default 0.5",
		FileLocation: at(8, 0, 29, 1),
	}
	retryNotIdempotent = checktest.ExpectedAnnotation{
		RuleID:       rules.RuleRetryNotIdempotent,
		Message:      "lint.v1.Orders.Charge: (resilient.v1.method).retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or remove retry",
		FileLocation: at(21, 2, 23, 3),
	}
	timeoutExceedsOverall = checktest.ExpectedAnnotation{
		RuleID:       rules.RuleTimeoutExceedsOverall,
		Message:      "lint.v1.Orders.Slow: (resilient.v1.method).overall_timeout: 1s is shorter than timeout 2s (set in (resilient.v1.service)): one attempt cannot outlast the whole call; lengthen overall_timeout or shorten timeout",
		FileLocation: at(26, 2, 28, 3),
	}
	noTimeout = checktest.ExpectedAnnotation{
		RuleID:       rules.RuleNoTimeout,
		Message:      "lint.v1.Bare.Ping: (resilient.v1.method).timeout: Ping has no timeout: a call waits as long as the caller's deadline allows, and for ever without one; set timeout (one attempt) or overall_timeout (the whole call) here, on the service or on the file",
		FileLocation: at(33, 2, 33, 66),
	}
)

// TestDefaultRules: the rules on by default are the plugin's refusals;
// RESILIENT_NO_TIMEOUT is off.
func TestDefaultRules(t *testing.T) {
	checktest.CheckTest{
		Request:             request(),
		Spec:                spec,
		ExpectedAnnotations: []checktest.ExpectedAnnotation{invalidValue, retryNotIdempotent, timeoutExceedsOverall},
	}.Run(t)
}

// TestEachRule: each rule alone, as buf.yaml can select it.
func TestEachRule(t *testing.T) {
	for _, want := range []checktest.ExpectedAnnotation{invalidValue, retryNotIdempotent, timeoutExceedsOverall, noTimeout} {
		t.Run(want.RuleID, func(t *testing.T) {
			checktest.CheckTest{
				Request:             request(want.RuleID),
				Spec:                spec,
				ExpectedAnnotations: []checktest.ExpectedAnnotation{want},
			}.Run(t)
		})
	}
}
