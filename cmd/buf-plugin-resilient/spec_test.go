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
	return requestFor("lint/lint.proto", ruleIDs...)
}

// requestFor lints one file under testdata with the rules named, or the
// default ones.
func requestFor(file string, ruleIDs ...string) *checktest.RequestSpec {
	return &checktest.RequestSpec{
		Files: &checktest.ProtoFileSpec{
			DirPaths:  []string{"testdata", "../../options"},
			FilePaths: []string{file},
		},
		RuleIDs: ruleIDs,
	}
}

func at(line, col, endLine, endCol int) *checktest.ExpectedFileLocation {
	return in("lint/lint.proto", line, col, endLine, endCol)
}

// in is a 0-based span of a file under testdata, as buf reports it.
func in(file string, line, col, endLine, endCol int) *checktest.ExpectedFileLocation {
	return &checktest.ExpectedFileLocation{FileName: file, StartLine: line, StartColumn: col, EndLine: endLine, EndColumn: endCol}
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

// annotation is an expected annotation of the rule under test: its span
// (0-based, as buf reports it) and message.
type annotation struct {
	line, col, endLine, endCol int
	message                    string
}

// TestCrossFieldRules: the plugin's refusals that involve several options,
// levels or the method's descriptor, one file per rule under
// testdata/lint that breaks that rule alone: the default rules find
// exactly its annotations, and so does the rule alone.
func TestCrossFieldRules(t *testing.T) {
	for _, tc := range []struct {
		rule, file string
		want       []annotation
	}{
		{rules.RuleMissingValue, "missing_value", []annotation{
			{14, 0, 29, 1, "lint.v1.Stock: (resilient.v1.service).bulkhead.permits: is required: set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}"},
			{14, 0, 29, 1, "lint.v1.Stock: (resilient.v1.service).shedding.critical: is required: set the in-flight limit of every priority, as in shedding: {low: 50, normal: 150, high: 180, critical: 200}"},
			{23, 2, 28, 3, "lint.v1.Stock.Get: (resilient.v1.method).hedging.delay: is required: set how long to wait for an answer before sending the next copy, about the method's observed p95, as in hedging: {delay: {nanos: 80000000}}"},
		}},
		{rules.RuleKeyField, "key_field", []annotation{
			{16, 2, 18, 3, `lint.v1.Orders.Put: (resilient.v1.method).idempotency_key: field "SKU" does not exist in lint.v1.Req (did you mean "sku"?): name a top-level string, bytes or integer field of the request`},
			{21, 2, 23, 3, `lint.v1.Orders.Tag: (resilient.v1.method).idempotency_key: field "tags" of lint.v1.Req is a repeated string field: an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`},
			{26, 2, 28, 3, "lint.v1.Orders.Upload: (resilient.v1.method).generate_idempotency_key: only unary calls send an idempotency key, and Upload is a client-streaming method: remove it"},
		}},
		{rules.RuleIdempotencyContradiction, "idempotency_contradiction", []annotation{
			{18, 2, 21, 3, "lint.v1.Orders.Get: (resilient.v1.method).idempotent: false contradicts option idempotency_level = NO_SIDE_EFFECTS on the same method: remove one of the two"},
			{24, 2, 26, 3, `lint.v1.Orders.Place: (resilient.v1.method).idempotency_key: Place names its field "sku" as the idempotency key while (resilient.v1.service) sets generate_idempotency_key: keep one; to send the field, add generate_idempotency_key: false beside idempotency_key`},
		}},
		{rules.RuleStreamRetry, "stream_retry", []annotation{
			{15, 2, 19, 3, "lint.v1.Feed.Watch: (resilient.v1.method).retry: streams are not retried, and Watch is a server-streaming method: remove retry (opening the stream still gets the timeout, breaker and bulkhead)"},
		}},
		{rules.RuleBackoffOrder, "backoff_order", []annotation{
			{23, 2, 23, 30, "lint.v1.Stock.Get: (resilient.v1.service).retry.max_backoff: 10ms is shorter than initial_backoff 50ms (the default): raise max_backoff or lower initial_backoff"},
			{26, 2, 32, 3, "lint.v1.Stock.Put: (resilient.v1.method).retry.initial_backoff: 2s is longer than max_backoff 10ms (set in (resilient.v1.service)): lower initial_backoff or raise max_backoff"},
		}},
		{rules.RuleScope, "scope", []annotation{
			{21, 2, 25, 3, "lint.v1.Stock.Get: (resilient.v1.method).circuit_breaker: a method's own circuit_breaker needs per_method: true, which gives the method a breaker of its own; to tune the breaker the service's methods share, move these settings to (resilient.v1.service)"},
			{28, 2, 32, 3, "lint.v1.Stock.Put: (resilient.v1.method).bulkhead: a method's own bulkhead needs per_method: true, which gives the method a bulkhead of its own; to tune the bulkhead the service's methods share, move these settings to (resilient.v1.service)"},
			{35, 2, 39, 3, "lint.v1.Stock.Watch: (resilient.v1.method).rate_limit: only unary calls are rate limited, and Watch is a server-streaming method: remove it"},
		}},
		{rules.RuleScope, "scope_nosvc", []annotation{
			{8, 0, 11, 2, "lint.v1: (resilient.v1.file): lint/scope_nosvc.proto declares no service, and a file's options are the defaults of its own services only (not of its package, nor of the files that import it), so these would apply to nothing: write them in each file that declares the services, or remove them"},
		}},
		{rules.RuleHedging, "hedging", []annotation{
			{20, 2, 26, 3, "lint.v1.Stock.Charge: (resilient.v1.method).hedging: Charge is not idempotent, and hedged copies run at the same time, so each could apply it: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT) if it is, or remove hedging"},
			{29, 2, 36, 3, "lint.v1.Stock.Get: (resilient.v1.method).hedging.delay: 100ms is not shorter than timeout 100ms (set in (resilient.v1.service)): each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout"},
		}},
		{rules.RuleCache, "cache", []annotation{
			{16, 2, 24, 3, `lint.v1.Stock.Get: (resilient.v1.method).cache.key_fields[0]: field "SKU" does not exist in lint.v1.Req (did you mean "sku"?): name top-level string, bytes or integer fields of the request`},
			{16, 2, 24, 3, "lint.v1.Stock.Get: (resilient.v1.method).cache: Get has neither timeout nor overall_timeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set timeout or overall_timeout"},
			{27, 2, 35, 3, "lint.v1.Stock.Reserve: (resilient.v1.method).cache: Reserve is not idempotent: only reads are cached, since a cached answer means the call is not made; mark the method idempotent (option idempotency_level = NO_SIDE_EFFECTS) if it is a read, or remove cache"},
		}},
		{rules.RuleAdaptive, "adaptive", []annotation{
			{20, 2, 20, 30, "lint.v1.Stock.Get: (resilient.v1.service).adaptive_limit: Get has no timeout: the limit halves when an attempt times out, and without a per-attempt timeout a dependency that hangs never makes it fall; set timeout on the method, the service or the file"},
			{23, 2, 27, 3, "lint.v1.Stock.Put: (resilient.v1.service).adaptive_limit: Put's timeout 200ms is as long as its overall_timeout 200ms: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall; shorten timeout below overall_timeout, or lengthen overall_timeout"},
		}},
		{rules.RuleServer, "server", []annotation{
			{14, 0, 41, 1, "lint.v1.Orders: (resilient.v1.service).shedding.normal: 40 is below low (50): the limits are cumulative, and a more important request may never be refused before a less important one; raise normal or lower low"},
			{23, 2, 29, 3, "lint.v1.Orders.Get: (resilient.v1.method).server.default_timeout: 500ms is shorter than min_deadline 1s (set in (resilient.v1.service)): a request without deadline would be refused as dead; lengthen default_timeout or shorten min_deadline"},
			{32, 2, 40, 3, "lint.v1.Orders.Put: (resilient.v1.method).server.dedup: Put sends no idempotency key, so the server could not recognise a repeat: name a request field in idempotency_key, set generate_idempotency_key: true, or remove dedup"},
		}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			file := "lint/" + tc.file + ".proto"
			var want []checktest.ExpectedAnnotation
			for _, w := range tc.want {
				want = append(want, checktest.ExpectedAnnotation{
					RuleID:       tc.rule,
					Message:      w.message,
					FileLocation: in(file, w.line, w.col, w.endLine, w.endCol),
				})
			}
			for _, ids := range [][]string{nil, {tc.rule}} {
				checktest.CheckTest{Request: requestFor(file, ids...), Spec: spec, ExpectedAnnotations: want}.Run(t)
			}
		})
	}
}
