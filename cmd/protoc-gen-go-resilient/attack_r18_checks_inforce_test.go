// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackR18ChecksAcceptedIsInForce: the plugin checks each level's
// values filled over the contract's defaults and their pairs on the
// merged levels. Random mixes of values, each right alone, that may be
// wrong together (backoffs, timeouts, count windows, adaptive bounds
// under permits, dedup ttl and lease, deadlines, keys, hedging with
// retries), spread over the file, the service and two methods: whatever
// the plugin accepts, the policy it generates passes Validate and
// NewClient, and its server policy Server.Validate and NewGuard. A value
// wrong in force that every level alone hid would fail here.
func TestAttackR18ChecksAcceptedIsInForce(t *testing.T) {
	shared := []string{
		`retry: {initial_backoff: {seconds: 2}}`, `retry: {max_backoff: {nanos: 10000000}}`, `retry: {max_attempts: 1}`, `retry: {max_attempts: 5, backoff_multiplier: 1}`,
		`timeout: {seconds: 2}`, `timeout: {nanos: 10000000}`, `overall_timeout: {seconds: 1}`, `overall_timeout: {nanos: 5000000}`,
		`circuit_breaker: {window_calls: 10}`, `circuit_breaker: {minimum_calls: 100}`, `circuit_breaker: {window: {seconds: 5}}`, `circuit_breaker: {window_calls: 50, minimum_calls: 5}`,
		`bulkhead: {permits: 1}`, `bulkhead: {permits: 200, max_wait: {seconds: 0}}`,
		`adaptive_limit: {}`, `adaptive_limit: {min_limit: 10}`, `adaptive_limit: {max_limit: 5}`, `adaptive_limit: {initial_limit: 50}`, `adaptive_limit: {max_limit: 1048576}`,
		`rate_limit: {requests_per_second: 0.5}`, `rate_limit: {burst: 1}`, `rate_limit: {requests_per_second: 1e9}`, `rate_limit: {requests_per_second: 4294967296}`,
		`server: {min_deadline: {seconds: 2}}`, `server: {default_timeout: {seconds: 1}}`, `server: {dedup: {ttl: {seconds: 1}}}`, `server: {dedup: {lease: {seconds: 3600}}}`,
		`server: {dedup: {ttl: {seconds: 3600}, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}}`,
		`idempotency_key: "request_id"`, `generate_idempotency_key: true`, `generate_idempotency_key: false`,
		`client_throttle: {k: 1, max_refusal: 0.01}`, `retry_budget: {ratio: 1, window: {nanos: 1}}`, `retry_budget: {min_retries: 0}`,
		`shedding: {low: 100}`, `shedding: {normal: 5, high: 6, critical: 7}`, `shedding: {low: 1, normal: 1, high: 1, critical: 1, code: "RESOURCE_EXHAUSTED"}`,
		`priority: PRIORITY_CRITICAL`,
	}
	get := []string{
		`idempotent: true`, `idempotent: false`, `hedging: {delay: {nanos: 500000000}}`, `hedging: {delay: {nanos: 1000000}, max_copies: 4294967295}`,
		`cache: {fresh_ttl: {seconds: 1}, key_fields: ["request_id"]}`, `cache: {fresh_ttl: {seconds: 1}, stale_ttl: {seconds: 2}, key_fields: ["request_id"], max_entries: 1}`,
		`circuit_breaker: {per_method: true, minimum_calls: 3}`, `circuit_breaker: {per_method: true, window_calls: 3}`, `bulkhead: {per_method: true, permits: 1}`,
		`adaptive_limit: {per_method: true}`, `adaptive_limit: {per_method: true, max_limit: 3}`, `rate_limit: {per_method: true}`, `rate_limit: {per_method: true, requests_per_second: 2}`,
		`timeout: {nanos: 100000000}`, `overall_timeout: {nanos: 50000000}`, `server: {default_timeout: {nanos: 5000000}}`, `server: {dedup: {ttl: {seconds: 60}}}`,
		`generate_idempotency_key: true`, `idempotency_key: "request_id"`, `retry: {initial_backoff: {nanos: 1000000}}`, `retry: {max_attempts: 1}`, `priority: PRIORITY_HIGH`,
	}
	watch := []string{`timeout: {seconds: 1}`, `retry: {max_attempts: 1}`, `bulkhead: {per_method: true, permits: 2}`, `circuit_breaker: {per_method: true}`, `priority: PRIORITY_LOW`}
	pick := func(r *rand.Rand, pool []string, most int) string {
		var out []string
		used := map[string]bool{}
		for range r.Intn(most + 1) {
			s := pool[r.Intn(len(pool))]
			head, _, _ := strings.Cut(s, ":")
			if !used[head] {
				used[head] = true
				out = append(out, s)
			}
		}
		return strings.Join(out, ", ")
	}
	r := rand.New(rand.NewSource(18))
	dir := t.TempDir()
	accepted, refused := 0, 0
	for i := range 600 {
		file, svc, g, w := pick(r, shared, 3), pick(r, shared, 3), pick(r, get, 4), pick(r, watch, 2)
		src := attackR18Source(file, svc, g, w)
		name := fmt.Sprintf("inforce%d.proto", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		req := compileRequest(t, "module="+testModule, []string{dir, "../../options"}, name)
		if runPlugin(t, req).GetError() != "" {
			refused++
			continue
		}
		accepted++
		at := fmt.Sprintf("file {%s} service {%s} Get {%s} Watch {%s}", file, svc, g, w)
		checkInForce(t, at, "Validate refuses the policy in force", resolveOne(t, req))
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted < 50 || refused < 50 {
		t.Fatalf("%d accepted, %d refused: the mixes try too little on one side", accepted, refused)
	}
}
