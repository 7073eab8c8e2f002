// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestRefusals runs the plugin on one input per refusal and checks the
// exact error, and that nothing is written.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"adaptive_min_above_permits", []string{
			"refuse/adaptive_min_above_permits.proto:10:3: resilienttest.refuse.adaptive_min_above_permits.Svc: (resilient.v1.service).adaptive_limit.min_limit: 5 is above the bulkhead's 4 permits, the limit's ceiling: lower it to at most 4, or remove it",
		}},
		{"adaptive_no_timeout", []string{
			"refuse/adaptive_no_timeout.proto:10:3: resilienttest.refuse.adaptive_no_timeout.Svc.Get: (resilient.v1.service).adaptive_limit: Get has no timeout: the limit halves when an attempt times out, and without a per-attempt timeout a dependency that hangs never makes it fall; set timeout on the method, the service or the file",
		}},
		{"adaptive_timeout_as_overall", []string{
			"refuse/adaptive_timeout_as_overall.proto:10:3: resilienttest.refuse.adaptive_timeout_as_overall.Svc.Get: (resilient.v1.service).adaptive_limit: Get's timeout 100ms is as long as its overall_timeout 100ms: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall; shorten timeout below overall_timeout, or lengthen overall_timeout",
		}},
		{"adaptive_stream", []string{
			"refuse/adaptive_stream.proto:13:5: resilienttest.refuse.adaptive_stream.Svc.Watch: (resilient.v1.method).adaptive_limit: streams take no part in the adaptive limit, and Watch is a server-streaming method: a stream's lifetime says nothing of the dependency's latency; remove it",
		}},
		{"adaptive_tolerance", []string{
			"refuse/adaptive_tolerance.proto:10:3: resilienttest.refuse.adaptive_tolerance.Svc: (resilient.v1.service).adaptive_limit.tolerance: must be a finite number of at least 1, got 0.5: below 1 the limit would shrink while the dependency is as fast as ever; remove it for the default 1.5",
		}},
		{"adaptive_initial_outside", []string{
			"refuse/adaptive_initial_outside.proto:10:3: resilienttest.refuse.adaptive_initial_outside.Svc: (resilient.v1.service).adaptive_limit.initial_limit: 2 is not between min_limit 4 and max_limit 10: set it within them, or remove it",
		}},
		{"throttle_on_method", []string{
			"refuse/throttle_on_method.proto:11:5: resilienttest.refuse.throttle_on_method.Svc.Get: (resilient.v1.method).client_throttle: client_throttle judges the whole dependency: set it on the service or the file",
		}},
		{"throttle_max_refusal", []string{
			"refuse/throttle_max_refusal.proto:10:3: resilienttest.refuse.throttle_max_refusal.Svc: (resilient.v1.service).client_throttle.max_refusal: must be in (0, 1), got 1: some attempts must always reach the dependency to see it recover; remove it for the default 0.9",
		}},
		{"window_calls_below_minimum", []string{
			"refuse/window_calls_below_minimum.proto:10:3: resilienttest.refuse.window_calls_below_minimum.Svc: (resilient.v1.service).circuit_breaker.window_calls: 10 is fewer than minimum_calls 20 (the default): the window could never hold enough calls to open the breaker; raise window_calls or lower minimum_calls",
		}},
		{"window_calls_with_window", []string{
			"refuse/window_calls_with_window.proto:10:3: resilienttest.refuse.window_calls_with_window.Svc: (resilient.v1.service).circuit_breaker.window_calls: is set beside window: the breaker counts over the last calls or over a stretch of time, not both; remove one",
		}},
		{"breaker_without_per_method", []string{
			"refuse/breaker_without_per_method.proto:13:5: resilienttest.refuse.breaker_without_per_method.Svc.Get: (resilient.v1.method).circuit_breaker: a method's own circuit_breaker needs per_method: true, which gives the method a breaker of its own; to tune the breaker the service's methods share, move these settings to (resilient.v1.service)",
		}},
		{"budget_ratio_range", []string{
			"refuse/budget_ratio_range.proto:10:3: resilienttest.refuse.budget_ratio_range.Svc: (resilient.v1.service).retry_budget.ratio: must be in (0, 1], got 0; remove it for the default 0.1",
		}},
		{"bulkhead_no_permits", []string{
			"refuse/bulkhead_no_permits.proto:10:3: resilienttest.refuse.bulkhead_no_permits.Svc: (resilient.v1.service).bulkhead.permits: is required: set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}",
		}},
		{"bulkhead_without_per_method", []string{
			"refuse/bulkhead_without_per_method.proto:11:5: resilienttest.refuse.bulkhead_without_per_method.Svc.Get: (resilient.v1.method).bulkhead: a method's own bulkhead needs per_method: true, which gives the method a bulkhead of its own; to tune the bulkhead the service's methods share, move these settings to (resilient.v1.service)",
		}},
		{"code_answer", []string{
			`refuse/code_answer.proto:11:5: resilienttest.refuse.code_answer.Svc.Get: (resilient.v1.method).retry.retryable_codes[1]: "NOT_FOUND" is an answer of the service, not a transient failure: repeating the call cannot change it; remove it`,
		}},
		{"code_ok", []string{
			`refuse/code_ok.proto:10:3: resilienttest.refuse.code_ok.Svc: (resilient.v1.service).circuit_breaker.failure_codes[0]: "OK" is a success and cannot count as a failure: remove it`,
			`refuse/code_ok.proto:13:5: resilienttest.refuse.code_ok.Svc.Get: (resilient.v1.method).retry.retryable_codes[0]: "OK" is a success, there is nothing to retry: remove it`,
		}},
		{"code_unknown", []string{
			`refuse/code_unknown.proto:11:5: resilienttest.refuse.code_unknown.Svc.Get: (resilient.v1.method).retry.retryable_codes[1]: unknown status code "Unavailable": did you mean "UNAVAILABLE"? Codes are written by their canonical upper-case name`,
			`refuse/code_unknown.proto:11:5: resilienttest.refuse.code_unknown.Svc.Get: (resilient.v1.method).retry.retryable_codes[2]: unknown status code "BOGUS": write a canonical upper-case gRPC code name, such as "UNAVAILABLE" or "DEADLINE_EXCEEDED"`,
		}},
		{"failure_code_answer", []string{
			`refuse/failure_code_answer.proto:10:3: resilienttest.refuse.failure_code_answer.Svc: (resilient.v1.service).circuit_breaker.failure_codes[1]: "NOT_FOUND" is an answer of the service, not a failure of it: an answer shows the dependency is up, so it never opens the breaker; remove it`,
		}},
		{"dedup_lease_negative", []string{
			"refuse/dedup_lease_negative.proto:12:5: resilienttest.refuse.dedup_lease_negative.Svc.Put: (resilient.v1.method).server.dedup.lease: must be at least 100ms, got -1s: the lease is renewed every quarter of it, and a shorter one lapses under an ordinary store round trip; remove it for the default 10s",
		}},
		{"dedup_lease_too_short", []string{
			"refuse/dedup_lease_too_short.proto:12:5: resilienttest.refuse.dedup_lease_too_short.Svc.Put: (resilient.v1.method).server.dedup.lease: must be at least 100ms, got 2ns: the lease is renewed every quarter of it, and a shorter one lapses under an ordinary store round trip; remove it for the default 10s",
		}},
		{"dedup_stream", []string{
			"refuse/dedup_stream.proto:12:5: resilienttest.refuse.dedup_stream.Svc.Watch: (resilient.v1.method).server.dedup: only unary requests are deduplicated, and Watch is a server-streaming method: remove dedup",
		}},
		{"dedup_ttl_missing", []string{
			"refuse/dedup_ttl_missing.proto:12:5: resilienttest.refuse.dedup_ttl_missing.Svc.Put: (resilient.v1.method).server.dedup.ttl: is required: set how long a result is kept and replayed, as in dedup: {ttl: {seconds: 86400}}",
		}},
		{"dedup_ttl_zero", []string{
			"refuse/dedup_ttl_zero.proto:12:5: resilienttest.refuse.dedup_ttl_zero.Svc.Put: (resilient.v1.method).server.dedup.ttl: must be at least 1s, got 0s: a result kept for less is gone before the client's retries of the request end",
		}},
		{"dedup_ttl_too_short", []string{
			"refuse/dedup_ttl_too_short.proto:12:5: resilienttest.refuse.dedup_ttl_too_short.Svc.Put: (resilient.v1.method).server.dedup.ttl: must be at least 1s, got 10ms: a result kept for less is gone before the client's retries of the request end",
		}},
		{"dedup_without_key", []string{
			"refuse/dedup_without_key.proto:12:5: resilienttest.refuse.dedup_without_key.Svc.Put: (resilient.v1.method).server.dedup: Put sends no idempotency key, so the server could not recognise a repeat: name a request field in idempotency_key, set generate_idempotency_key: true, or remove dedup",
		}},
		{"default_timeout_below_min_deadline", []string{
			"refuse/default_timeout_below_min_deadline.proto:12:5: resilienttest.refuse.default_timeout_below_min_deadline.Svc.Get: (resilient.v1.method).server.default_timeout: 500ms is shorter than min_deadline 1s (set in (resilient.v1.service)): a request without deadline would be refused as dead; lengthen default_timeout or shorten min_deadline",
		}},
		{"default_timeout_zero", []string{
			"refuse/default_timeout_zero.proto:10:3: resilienttest.refuse.default_timeout_zero.Svc: (resilient.v1.service).server.default_timeout: must be positive, got 0s; remove it to leave a request without deadline unbounded",
		}},
		{"duration_invalid", []string{
			"refuse/duration_invalid.proto:11:5: resilienttest.refuse.duration_invalid.Svc.Get: (resilient.v1.method).timeout: is not a valid duration: nanos 1500000000 must lie within ±999999999; carry whole seconds into seconds, as in {seconds: 1, nanos: 500000000} for 1.5s",
		}},
		{"duration_negative", []string{
			"refuse/duration_negative.proto:10:3: resilienttest.refuse.duration_negative.Svc: (resilient.v1.service).circuit_breaker.cool_down: must be positive, got -5s; remove it for the default 10s",
		}},
		{"duration_sign", []string{
			"refuse/duration_sign.proto:11:5: resilienttest.refuse.duration_sign.Svc.Get: (resilient.v1.method).overall_timeout: is not a valid duration: seconds 1 and nanos -5 must have the same sign",
		}},
		{"failure_ratio_range", []string{
			"refuse/failure_ratio_range.proto:10:3: resilienttest.refuse.failure_ratio_range.Svc: (resilient.v1.service).circuit_breaker.failure_ratio: must be in (0, 1], got 1.5; remove it for the default 0.5",
		}},
		{"half_open_probes_zero", []string{
			"refuse/half_open_probes_zero.proto:10:3: resilienttest.refuse.half_open_probes_zero.Svc: (resilient.v1.service).circuit_breaker.half_open_probes: must be at least 1, got 0; remove it for the default 3",
		}},
		{"idempotent_contradiction", []string{
			"refuse/idempotent_contradiction.proto:12:5: resilienttest.refuse.idempotent_contradiction.Svc.Get: (resilient.v1.method).idempotent: false contradicts option idempotency_level = NO_SIDE_EFFECTS on the same method: remove one of the two",
		}},
		{"initial_backoff_above_max", []string{
			"refuse/initial_backoff_above_max.proto:12:5: resilienttest.refuse.initial_backoff_above_max.Svc.Get: (resilient.v1.method).retry.initial_backoff: 2s is longer than max_backoff 1s (the default): lower initial_backoff or raise max_backoff",
		}},
		{"key_default", []string{
			`refuse/key_default.proto:11:5: resilienttest.refuse.key_default.Svc.ByInt: (resilient.v1.method).idempotency_key: field "seq" of resilienttest.refuse.key_default.Req has the default 5: a request that leaves it unset reads the default, so every such request would send the same key (retried, and deduplicated by the server as one request); remove the default, so that an unset key is no key`,
			`refuse/key_default.proto:14:5: resilienttest.refuse.key_default.Svc.ByString: (resilient.v1.method).idempotency_key: field "request_id" of resilienttest.refuse.key_default.Req has the default "new": a request that leaves it unset reads the default, so every such request would send the same key (retried, and deduplicated by the server as one request); remove the default, so that an unset key is no key`,
		}},
		{"key_missing_field", []string{
			`refuse/key_missing_field.proto:11:5: resilienttest.refuse.key_missing_field.Svc.Put: (resilient.v1.method).idempotency_key: field "requestId" does not exist in resilienttest.refuse.key_missing_field.Req (did you mean "request_id"?): name a top-level string, bytes or integer field of the request`,
		}},
		{"key_wrong_type", []string{
			`refuse/key_wrong_type.proto:11:5: resilienttest.refuse.key_wrong_type.Svc.ByList: (resilient.v1.method).idempotency_key: field "tags" of resilienttest.refuse.key_wrong_type.Req is a repeated string field: an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
			`refuse/key_wrong_type.proto:14:5: resilienttest.refuse.key_wrong_type.Svc.ByMap: (resilient.v1.method).idempotency_key: field "labels" of resilienttest.refuse.key_wrong_type.Req is a map: an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
			`refuse/key_wrong_type.proto:17:5: resilienttest.refuse.key_wrong_type.Svc.ByMessage: (resilient.v1.method).idempotency_key: field "nested" of resilienttest.refuse.key_wrong_type.Req is a message (resilienttest.refuse.key_wrong_type.Resp): an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
			`refuse/key_wrong_type.proto:20:5: resilienttest.refuse.key_wrong_type.Svc.ByEnum: (resilient.v1.method).idempotency_key: field "color" of resilienttest.refuse.key_wrong_type.Req is an enum (resilienttest.refuse.key_wrong_type.Color): an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
			`refuse/key_wrong_type.proto:23:5: resilienttest.refuse.key_wrong_type.Svc.ByBool: (resilient.v1.method).idempotency_key: field "flag" of resilienttest.refuse.key_wrong_type.Req is a bool: an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
			`refuse/key_wrong_type.proto:26:5: resilienttest.refuse.key_wrong_type.Svc.ByDouble: (resilient.v1.method).idempotency_key: field "amount" of resilienttest.refuse.key_wrong_type.Req is a double: an idempotency key must be a singular string, bytes or integer field (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`,
		}},
		{"max_attempts_zero", []string{
			"refuse/max_attempts_zero.proto:11:5: resilienttest.refuse.max_attempts_zero.Svc.Get: (resilient.v1.method).retry.max_attempts: must be at least 1, got 0 (it counts the first attempt, and 1 means no retry); remove it for the default 3",
		}},
		{"max_backoff_below_initial", []string{
			"refuse/max_backoff_below_initial.proto:10:3: resilienttest.refuse.max_backoff_below_initial.Svc.Get: (resilient.v1.service).retry.max_backoff: 10ms is shorter than initial_backoff 50ms (the default): raise max_backoff or lower initial_backoff",
		}},
		{"max_wait_negative", []string{
			"refuse/max_wait_negative.proto:10:3: resilienttest.refuse.max_wait_negative.Svc: (resilient.v1.service).bulkhead.max_wait: must not be negative, got -1ms; use 0 to refuse a call at once when every permit is taken",
		}},
		{"min_deadline_negative", []string{
			"refuse/min_deadline_negative.proto:12:5: resilienttest.refuse.min_deadline_negative.Svc.Get: (resilient.v1.method).server.min_deadline: must be positive, got -20ms; remove it to refuse only the requests whose deadline has passed",
		}},
		{"minimum_calls_zero", []string{
			"refuse/minimum_calls_zero.proto:10:3: resilienttest.refuse.minimum_calls_zero.Svc: (resilient.v1.service).circuit_breaker.minimum_calls: must be at least 1, got 0; remove it for the default 20",
		}},
		{"multiplier_below_one", []string{
			"refuse/multiplier_below_one.proto:11:5: resilienttest.refuse.multiplier_below_one.Svc.Get: (resilient.v1.method).retry.backoff_multiplier: must be a finite number of at least 1, got 0.5; remove it for the default 2",
		}},
		{"multiplier_nan", []string{
			"refuse/multiplier_nan.proto:11:5: resilienttest.refuse.multiplier_nan.Svc.Get: (resilient.v1.method).retry.backoff_multiplier: must be a finite number of at least 1, got NaN; remove it for the default 2",
		}},
		{"on_store_error_unknown", []string{
			"refuse/on_store_error_unknown.proto:12:5: resilienttest.refuse.on_store_error_unknown.Svc.Put: (resilient.v1.method).server.dedup.on_store_error: unknown value 7, perhaps of a newer version of the options than this program knows: write ON_STORE_ERROR_REFUSE or ON_STORE_ERROR_RUN_WITHOUT_DEDUP, or upgrade this program to the version of your copy of resilient.proto",
		}},
		{"overall_below_timeout", []string{
			"refuse/overall_below_timeout.proto:13:5: resilienttest.refuse.overall_below_timeout.Svc.Get: (resilient.v1.method).overall_timeout: 1s is shorter than timeout 2s (set in (resilient.v1.service)): one attempt cannot outlast the whole call; lengthen overall_timeout or shorten timeout",
		}},
		{"per_method_on_file", []string{
			"refuse/per_method_on_file.proto:8:1: resilienttest.refuse.per_method_on_file: (resilient.v1.file).bulkhead.per_method: per_method is only meaningful on a method: remove it here, and set bulkhead: {per_method: true, permits: N} on each method that needs a bulkhead of its own",
		}},
		{"per_method_on_service", []string{
			"refuse/per_method_on_service.proto:10:3: resilienttest.refuse.per_method_on_service.Svc: (resilient.v1.service).circuit_breaker.per_method: per_method is only meaningful on a method: remove it here, and set circuit_breaker: {per_method: true} on each method that needs a breaker of its own",
		}},
		{"permits_zero", []string{
			"refuse/permits_zero.proto:10:3: resilienttest.refuse.permits_zero.Svc: (resilient.v1.service).bulkhead.permits: must be at least 1, got 0: it is the number of calls allowed in flight at once",
		}},
		{"priority_unknown", []string{
			"refuse/priority_unknown.proto:12:5: resilienttest.refuse.priority_unknown.Svc.Get: (resilient.v1.method).priority: unknown value 9, perhaps of a newer version of the options than this program knows: write PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH or PRIORITY_CRITICAL, or upgrade this program to the version of your copy of resilient.proto",
		}},
		{"retry_budget_on_method", []string{
			"refuse/retry_budget_on_method.proto:11:5: resilienttest.refuse.retry_budget_on_method.Svc.Get: (resilient.v1.method).retry_budget: retry_budget is shared by the whole dependency: set it on the service or the file",
		}},
		{"retry_code_repeated", []string{
			`refuse/retry_code_repeated.proto:11:5: resilienttest.refuse.retry_code_repeated.Svc.Get: (resilient.v1.method).retry.retryable_codes[1]: "UNAVAILABLE" is listed twice: remove the repeat`,
		}},
		{"retry_inherited_not_idempotent", []string{
			"refuse/retry_inherited_not_idempotent.proto:10:3: resilienttest.refuse.retry_inherited_not_idempotent.Svc.Charge: (resilient.v1.service).retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or turn retries off for it with (resilient.v1.method) = {retry: {max_attempts: 1}}",
		}},
		{"retry_not_idempotent", []string{
			"refuse/retry_not_idempotent.proto:12:5: resilienttest.refuse.retry_not_idempotent.Svc.Charge: (resilient.v1.method).retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or remove retry",
		}},
		{"shedding_code", []string{
			`refuse/shedding_code.proto:10:3: resilienttest.refuse.shedding_code.Svc: (resilient.v1.service).shedding.code: must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "INTERNAL"; remove it for the default "UNAVAILABLE"`,
		}},
		{"shedding_missing", []string{
			"refuse/shedding_missing.proto:10:3: resilienttest.refuse.shedding_missing.Svc: (resilient.v1.service).shedding.critical: is required: set the in-flight limit of every priority, as in shedding: {low: 50, normal: 150, high: 180, critical: 200}",
		}},
		{"shedding_on_method", []string{
			"refuse/shedding_on_method.proto:12:5: resilienttest.refuse.shedding_on_method.Svc.Get: (resilient.v1.method).shedding: shedding limits the requests in flight of the whole service: set it on the service or the file, and give the method a priority instead",
		}},
		{"shedding_order", []string{
			"refuse/shedding_order.proto:10:3: resilienttest.refuse.shedding_order.Svc: (resilient.v1.service).shedding.normal: 40 is below low (50): the limits are cumulative, and a more important request may never be refused before a less important one; raise normal or lower low",
			"refuse/shedding_order.proto:10:3: resilienttest.refuse.shedding_order.Svc: (resilient.v1.service).shedding.critical: 100 is below high (180): the limits are cumulative, and a more important request may never be refused before a less important one; raise critical or lower high",
		}},
		{"shedding_pushback_zero", []string{
			"refuse/shedding_pushback_zero.proto:10:3: resilienttest.refuse.shedding_pushback_zero.Svc: (resilient.v1.service).shedding.pushback: must be positive, got 0s; remove it for the default 1s",
		}},
		{"shedding_zero", []string{
			"refuse/shedding_zero.proto:10:3: resilienttest.refuse.shedding_zero.Svc: (resilient.v1.service).shedding.low: must be at least 1, got 0; it is the number of requests in flight from which low-priority requests are refused",
		}},
		{"slow_call_threshold_zero", []string{
			"refuse/slow_call_threshold_zero.proto:10:3: resilienttest.refuse.slow_call_threshold_zero.Svc: (resilient.v1.service).circuit_breaker.slow_call_threshold: must be positive, got 0s; remove it to count no call as slow",
		}},
		{"stream_key", []string{
			"refuse/stream_key.proto:11:5: resilienttest.refuse.stream_key.Svc.Upload: (resilient.v1.method).idempotency_key: only unary calls send an idempotency key, and Upload is a client-streaming method: remove it",
		}},
		{"stream_retry", []string{
			"refuse/stream_retry.proto:11:5: resilienttest.refuse.stream_retry.Svc.Watch: (resilient.v1.method).retry: streams are not retried, and Watch is a server-streaming method: remove retry (opening the stream still gets the timeout, breaker and bulkhead)",
		}},
		{"timeout_exceeds_overall", []string{
			"refuse/timeout_exceeds_overall.proto:13:5: resilienttest.refuse.timeout_exceeds_overall.Svc.Get: (resilient.v1.method).timeout: 2s is longer than overall_timeout 1s (set in (resilient.v1.service)): one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout",
		}},
		{"timeout_zero", []string{
			"refuse/timeout_zero.proto:11:5: resilienttest.refuse.timeout_zero.Svc.Get: (resilient.v1.method).timeout: must be positive, got 0s; remove it for no per-attempt limit",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := runPlugin(t, testRequest(t, "refuse/"+tc.name+".proto"))
			if len(resp.File) != 0 {
				t.Errorf("a refused policy still gave %d files", len(resp.File))
			}
			if got, want := resp.GetError(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestRefusalsTogether checks that every problem of every file is reported
// at once, in order, and that a refusal in one file stops the output of
// all of them.
func TestRefusalsTogether(t *testing.T) {
	req := testRequest(t, "gen/timeout.proto", "refuse/several.proto", "refuse/code_ok.proto")
	resp := runPlugin(t, req)
	if len(resp.File) != 0 {
		t.Errorf("a refused policy still gave %d files", len(resp.File))
	}
	want := strings.Join([]string{
		"refuse/several.proto:8:1: resilienttest.refuse.several: (resilient.v1.file).timeout: must be positive, got -1s; remove it for no per-attempt limit",
		"refuse/several.proto:11:3: resilienttest.refuse.several.Svc: (resilient.v1.service).circuit_breaker.failure_ratio: must be in (0, 1], got 2; remove it for the default 0.5",
		"refuse/several.proto:11:3: resilienttest.refuse.several.Svc: (resilient.v1.service).circuit_breaker.minimum_calls: must be at least 1, got 0; remove it for the default 20",
		"refuse/several.proto:14:5: resilienttest.refuse.several.Svc.Charge: (resilient.v1.method).retry_budget: retry_budget is shared by the whole dependency: set it on the service or the file",
		"refuse/several.proto:14:5: resilienttest.refuse.several.Svc.Charge: (resilient.v1.method).retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or remove retry",
		"refuse/several.proto:17:5: resilienttest.refuse.several.Svc.Watch: (resilient.v1.method).retry.max_attempts: must be at least 1, got 0 (it counts the first attempt, and 1 means no retry); remove it for the default 3",
		"refuse/several.proto:17:5: resilienttest.refuse.several.Svc.Watch: (resilient.v1.method).retry: streams are not retried, and Watch is a server-streaming method: remove retry (opening the stream still gets the timeout, breaker and bulkhead)",
		"refuse/several.proto:17:5: resilienttest.refuse.several.Svc.Watch: (resilient.v1.method).idempotency_key: only unary calls send an idempotency key, and Watch is a server-streaming method: remove it",
		`refuse/code_ok.proto:10:3: resilienttest.refuse.code_ok.Svc: (resilient.v1.service).circuit_breaker.failure_codes[0]: "OK" is a success and cannot count as a failure: remove it`,
		`refuse/code_ok.proto:13:5: resilienttest.refuse.code_ok.Svc.Get: (resilient.v1.method).retry.retryable_codes[0]: "OK" is a success, there is nothing to retry: remove it`,
	}, "\n")
	if got := resp.GetError(); got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
}

func TestDefaults(t *testing.T) {
	r := resolved[policy.Retry]("retry", &resilientv1.Retry{})
	if r.MaxAttempts != 3 || r.InitialBackoff != 50*time.Millisecond || r.MaxBackoff != time.Second || r.Multiplier != 2 ||
		r.RetryableCodes != policy.CodesOf(codes.Unavailable) {
		t.Errorf("retry defaults: %+v", r)
	}
	b := resolved[policy.Budget]("retry_budget", (*resilientv1.RetryBudget)(nil))
	if b.Ratio != 0.1 || b.MinRetries != 10 || b.Window != 10*time.Second {
		t.Errorf("budget defaults: %+v", b)
	}
	cb := resolved[policy.Breaker]("circuit_breaker", &resilientv1.CircuitBreaker{})
	if cb.FailureRatio != 0.5 || cb.MinimumCalls != 20 || cb.Window != 10*time.Second || cb.CoolDown != 10*time.Second ||
		cb.HalfOpenProbes != 3 || cb.SlowCallThreshold != 0 || cb.FailureCodes != policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded) {
		t.Errorf("breaker defaults: %+v", cb)
	}
}

func TestDurationLimits(t *testing.T) {
	var ps problems
	at := site{pos: "x.proto:1:1"}
	for _, d := range []*durationpb.Duration{
		{Seconds: math.MaxInt64 / 2},
		{Seconds: math.MaxInt64/int64(time.Second) - 1, Nanos: 999999999},
		{Nanos: 1},
	} {
		rules.Check(&resilientv1.Policy{Timeout: d}, true, func(path, format string, args ...any) {
			ps.add(at, rules.LevelMethod, path, format, args...)
		})
	}
	if len(ps) != 1 || !strings.Contains(ps[0].msg, "292 years") {
		t.Errorf("problems %v, want one about a time.Duration overflow", ps)
	}
}

func TestUnexport(t *testing.T) {
	for in, want := range map[string]string{
		"GetStock": "getStock",
		"URLFetch": "urlFetch",
		"URL":      "url",
		"ID2":      "id2",
		"X":        "x",
		"get":      "get",
	} {
		if got := unexport(in); got != want {
			t.Errorf("unexport(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPositionsPointAtTheValue: a problem is reported at the option value
// at fault where the source info has it: the field of an option written
// field by field, the option statement of one written as a message, and
// the service's option for a value a method inherits from it, not the
// rpc line.
func TestPositionsPointAtTheValue(t *testing.T) {
	resp := runPlugin(t, testRequest(t, "refuse/position_field.proto"))
	want := strings.Join([]string{
		"refuse/position_field.proto:15:5: resilienttest.refuse.position_field.Svc.Get: (resilient.v1.method).retry.max_attempts: must be at least 1, got 0 (it counts the first attempt, and 1 means no retry); remove it for the default 3",
		`refuse/position_field.proto:16:5: resilienttest.refuse.position_field.Svc.Get: (resilient.v1.method).retry.retryable_codes[0]: "NOT_FOUND" is an answer of the service, not a transient failure: repeating the call cannot change it; remove it`,
		"refuse/position_field.proto:10:3: resilienttest.refuse.position_field.Svc.Put: (resilient.v1.service).retry: Put is not idempotent and has no idempotency_key, so a retry could apply it twice: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or turn retries off for it with (resilient.v1.method) = {retry: {max_attempts: 1}}",
	}, "\n")
	if got := resp.GetError(); got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
}
