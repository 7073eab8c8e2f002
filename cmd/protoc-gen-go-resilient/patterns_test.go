// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestPatternRefusals runs the plugin on one input per refusal of hedging,
// rate_limit, cache and generate_idempotency_key, and checks the exact
// error, and that nothing is written.
func TestPatternRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"hedging_not_idempotent", []string{
			`refuse/hedging_not_idempotent.proto:11:5: resilienttest.refuse.hedging_not_idempotent.Svc.Charge: (resilient.v1.method).hedging: Charge is not idempotent, and hedged copies run at the same time, so each could apply it: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT) if it is, or remove hedging`,
		}},
		{"hedging_delay_missing", []string{
			`refuse/hedging_delay_missing.proto:11:5: resilienttest.refuse.hedging_delay_missing.Svc.Get: (resilient.v1.method).hedging.delay: is required: set how long to wait for an answer before sending the next copy, about the method's observed p95, as in hedging: {delay: {nanos: 80000000}}`,
		}},
		{"hedging_delay_zero", []string{
			`refuse/hedging_delay_zero.proto:11:5: resilienttest.refuse.hedging_delay_zero.Svc.Get: (resilient.v1.method).hedging.delay: must be positive, got 0s; a good value is the method's observed p95`,
		}},
		{"hedging_max_copies_one", []string{
			`refuse/hedging_max_copies_one.proto:11:5: resilienttest.refuse.hedging_max_copies_one.Svc.Get: (resilient.v1.method).hedging.max_copies: must be at least 2, got 1 (it counts the first copy, and 1 would mean no hedging); remove it for the default 2`,
		}},
		{"hedging_with_retry", []string{
			`refuse/hedging_with_retry.proto:13:5: resilienttest.refuse.hedging_with_retry.Svc.Get: (resilient.v1.method).hedging: Get also retries (set in (resilient.v1.service)): a method hedges or retries, not both, since hedged copies already repeat the call; remove one, or turn retries off for it with retry: {max_attempts: 1}`,
		}},
		{"hedging_on_service", []string{
			`refuse/hedging_on_service.proto:10:3: resilienttest.refuse.hedging_on_service.Svc: (resilient.v1.service).hedging: hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method`,
		}},
		{"hedging_stream", []string{
			`refuse/hedging_stream.proto:11:5: resilienttest.refuse.hedging_stream.Svc.Watch: (resilient.v1.method).hedging: streams are not hedged, and Watch is a server-streaming method: remove hedging`,
		}},
		{"hedging_delay_not_below_timeout", []string{
			`refuse/hedging_delay_not_below_timeout.proto:13:5: resilienttest.refuse.hedging_delay_not_below_timeout.Svc.Get: (resilient.v1.method).hedging.delay: 100ms is not shorter than timeout 100ms (set in (resilient.v1.service)): each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout`,
		}},
		{"hedging_code_answer", []string{
			`refuse/hedging_code_answer.proto:11:5: resilienttest.refuse.hedging_code_answer.Svc.Get: (resilient.v1.method).hedging.non_fatal_codes[1]: "NOT_FOUND" is an answer of the service, not a transient failure: repeating the call cannot change it; remove it`,
		}},
		{"cache_not_idempotent", []string{
			`refuse/cache_not_idempotent.proto:11:5: resilienttest.refuse.cache_not_idempotent.Svc.Reserve: (resilient.v1.method).cache: Reserve is not idempotent: only reads are cached, since a cached answer means the call is not made; mark the method idempotent (option idempotency_level = NO_SIDE_EFFECTS) if it is a read, or remove cache`,
		}},
		{"cache_stream", []string{
			`refuse/cache_stream.proto:11:5: resilienttest.refuse.cache_stream.Svc.Watch: (resilient.v1.method).cache: streams are not cached, and Watch is a server-streaming method: remove cache`,
		}},
		{"cache_key_fields_missing", []string{
			`refuse/cache_key_fields_missing.proto:11:5: resilienttest.refuse.cache_key_fields_missing.Svc.Get: (resilient.v1.method).cache.key_fields: is required: name the request fields whose values make the cache key, as in cache: {key_fields: ["sku"]}`,
		}},
		{"cache_key_unknown", []string{
			`refuse/cache_key_unknown.proto:11:5: resilienttest.refuse.cache_key_unknown.Svc.Get: (resilient.v1.method).cache.key_fields[0]: field "SKU" does not exist in resilienttest.refuse.cache_key_unknown.Req (did you mean "sku"?): name top-level string, bytes or integer fields of the request`,
			`refuse/cache_key_unknown.proto:11:5: resilienttest.refuse.cache_key_unknown.Svc.Get: (resilient.v1.method).cache.key_fields[1]: field "warehouse" does not exist in resilienttest.refuse.cache_key_unknown.Req: name top-level string, bytes or integer fields of the request`,
		}},
		{"cache_key_not_scalar", []string{
			`refuse/cache_key_not_scalar.proto:11:5: resilienttest.refuse.cache_key_not_scalar.Svc.Get: (resilient.v1.method).cache.key_fields[0]: field "tags" of resilienttest.refuse.cache_key_not_scalar.Req is a repeated string field: a cache key field must be a singular string, bytes or integer field`,
			`refuse/cache_key_not_scalar.proto:11:5: resilienttest.refuse.cache_key_not_scalar.Svc.Get: (resilient.v1.method).cache.key_fields[1]: field "nested" of resilienttest.refuse.cache_key_not_scalar.Req is a message (resilienttest.refuse.cache_key_not_scalar.Resp): a cache key field must be a singular string, bytes or integer field`,
			`refuse/cache_key_not_scalar.proto:11:5: resilienttest.refuse.cache_key_not_scalar.Svc.Get: (resilient.v1.method).cache.key_fields[2]: field "amount" of resilienttest.refuse.cache_key_not_scalar.Req is a double: a cache key field must be a singular string, bytes or integer field`,
		}},
		{"cache_key_repeated", []string{
			`refuse/cache_key_repeated.proto:11:5: resilienttest.refuse.cache_key_repeated.Svc.Get: (resilient.v1.method).cache.key_fields[1]: "sku" is listed twice: remove the repeat`,
		}},
		{"cache_stale_below_fresh", []string{
			`refuse/cache_stale_below_fresh.proto:11:5: resilienttest.refuse.cache_stale_below_fresh.Svc.Get: (resilient.v1.method).cache.stale_ttl: 5s is shorter than fresh_ttl 10s: an answer is stale only after it stopped being fresh; remove it for no stale answers (the default, equal to fresh_ttl)`,
		}},
		{"cache_fresh_missing", []string{
			`refuse/cache_fresh_missing.proto:11:5: resilienttest.refuse.cache_fresh_missing.Svc.Get: (resilient.v1.method).cache.fresh_ttl: is required: set how long an answer is served without calling, as in cache: {fresh_ttl: {seconds: 1}}`,
		}},
		{"cache_no_timeout", []string{
			`refuse/cache_no_timeout.proto:11:5: resilienttest.refuse.cache_no_timeout.Svc.Get: (resilient.v1.method).cache: Get has neither timeout nor overall_timeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set timeout or overall_timeout`,
		}},
		{"cache_on_service", []string{
			`refuse/cache_on_service.proto:10:3: resilienttest.refuse.cache_on_service.Svc: (resilient.v1.service).cache: a cache is keyed by the fields of one method's request: move it to the (resilient.v1.method) of each cached method`,
		}},
		{"cache_max_entries_zero", []string{
			`refuse/cache_max_entries_zero.proto:11:5: resilienttest.refuse.cache_max_entries_zero.Svc.Get: (resilient.v1.method).cache.max_entries: must be at least 1, got 0; remove it for the default 10000`,
		}},
		{"rate_limit_rps_missing", []string{
			`refuse/rate_limit_rps_missing.proto:10:3: resilienttest.refuse.rate_limit_rps_missing.Svc: (resilient.v1.service).rate_limit.requests_per_second: is required: set the sustained rate of calls allowed, as in rate_limit: {requests_per_second: 200}`,
		}},
		{"rate_limit_rps_zero", []string{
			`refuse/rate_limit_rps_zero.proto:10:3: resilienttest.refuse.rate_limit_rps_zero.Svc: (resilient.v1.service).rate_limit.requests_per_second: must be a positive, finite number, got 0; it is the sustained rate of calls allowed`,
		}},
		{"rate_limit_rps_nan", []string{
			`refuse/rate_limit_rps_nan.proto:10:3: resilienttest.refuse.rate_limit_rps_nan.Svc: (resilient.v1.service).rate_limit.requests_per_second: must be a positive, finite number, got NaN; it is the sustained rate of calls allowed`,
		}},
		{"rate_limit_burst_zero", []string{
			`refuse/rate_limit_burst_zero.proto:10:3: resilienttest.refuse.rate_limit_burst_zero.Svc: (resilient.v1.service).rate_limit.burst: must be at least 1, got 0; remove it for the default, requests_per_second rounded up`,
		}},
		{"rate_limit_max_wait_negative", []string{
			`refuse/rate_limit_max_wait_negative.proto:10:3: resilienttest.refuse.rate_limit_max_wait_negative.Svc: (resilient.v1.service).rate_limit.max_wait: must not be negative, got -1ms; use 0 to refuse a call at once when no token is left`,
		}},
		{"rate_limit_per_method_on_service", []string{
			`refuse/rate_limit_per_method_on_service.proto:10:3: resilienttest.refuse.rate_limit_per_method_on_service.Svc: (resilient.v1.service).rate_limit.per_method: per_method is only meaningful on a method: remove it here, and set rate_limit: {per_method: true, requests_per_second: N} on each method that needs a limit of its own`,
		}},
		{"rate_limit_without_per_method", []string{
			`refuse/rate_limit_without_per_method.proto:13:5: resilienttest.refuse.rate_limit_without_per_method.Svc.Get: (resilient.v1.method).rate_limit: a method's own rate_limit needs per_method: true, which gives the method a token bucket of its own; to tune the limit the service's methods share, move these settings to (resilient.v1.service)`,
		}},
		{"rate_limit_stream", []string{
			`refuse/rate_limit_stream.proto:11:5: resilienttest.refuse.rate_limit_stream.Svc.Watch: (resilient.v1.method).rate_limit: only unary calls are rate limited, and Watch is a server-streaming method: remove it`,
		}},
		{"generate_key_with_key", []string{
			`refuse/generate_key_with_key.proto:11:5: resilienttest.refuse.generate_key_with_key.Svc.Place: (resilient.v1.method).generate_idempotency_key: the method already sends its field "sku" as the idempotency key: set one or the other`,
		}},
		{"generate_key_inherited_with_key", []string{
			`refuse/generate_key_inherited_with_key.proto:13:5: resilienttest.refuse.generate_key_inherited_with_key.Svc.Place: (resilient.v1.method).idempotency_key: Place names its field "sku" as the idempotency key while (resilient.v1.service) sets generate_idempotency_key: keep one; to send the field, add generate_idempotency_key: false beside idempotency_key`,
		}},
		{"generate_key_stream", []string{
			`refuse/generate_key_stream.proto:11:5: resilienttest.refuse.generate_key_stream.Svc.Upload: (resilient.v1.method).generate_idempotency_key: only unary calls send an idempotency key, and Upload is a client-streaming method: remove it`,
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
