// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"
)

// TestAttack24hEnvoyRoundingEdges: the rounding of stop 24 (a route never
// longer than overall_timeout, cut to the millisecond below; no
// per_try_timeout as long as the route) at its edges: a timeout equal to
// the overall_timeout (whole milliseconds, and not), one longer than it,
// one shorter in the policy that the cut route equals (2ms of 2.5ms),
// an overall_timeout below 1 ms, and hedged methods (one copy per request
// at Envoy). Every route keeps: its timeout no longer than
// overall_timeout as Envoy can say it, a per_try_timeout only when
// shorter than the route's, gateway-error only with such a one. G (2ms
// and 2ms) and Q (2ms of 2.5ms, the route cut to 2ms) had a
// per_try_timeout of 2ms in a route of 2ms, Q's DEADLINE_EXCEEDED
// retried as gateway-error with no time left to retry.
func TestAttack24hEnvoyRoundingEdges(t *testing.T) {
	src := `syntax = "proto3";
package attack24h.round;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack24h/round";
service S {
  rpc G(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 2000000}, overall_timeout: {nanos: 2000000}, retry: {max_attempts: 3, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc J(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1500000}, overall_timeout: {nanos: 1500000}, retry: {max_attempts: 3, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc K(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 400000}, overall_timeout: {nanos: 400000}, retry: {max_attempts: 2, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc L(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 300000}, overall_timeout: {nanos: 900000}, hedging: {delay: {nanos: 100000}, max_copies: 2}};
  }
  rpc N(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1500000}, overall_timeout: {nanos: 2500000}, hedging: {delay: {nanos: 500000}, max_copies: 3}};
  }
  rpc Q(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 2000000}, overall_timeout: {nanos: 2500000}, retry: {max_attempts: 3, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc P(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {overall_timeout: {nanos: 1}};
  }
}
message M {}
`
	overall := map[string]time.Duration{"G": 2 * time.Millisecond, "J": 1500 * time.Microsecond, "K": 400 * time.Microsecond,
		"L": 900 * time.Microsecond, "N": 2500 * time.Microsecond, "P": time.Nanosecond, "Q": 2500 * time.Microsecond}
	for _, params := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "round.proto", src, params)
		if perr != "" {
			t.Fatal(perr)
		}
		y := files["attack24h/round/round.envoy.yaml"]
		checkEnvoyRoundedRoutes(t, params, y, "attack24h.round.S/", overall)
	}
}

// checkEnvoyRoundedRoutes checks the route of each method of overall (by
// name, its overall_timeout) in the Envoy export y, its paths prefix
// (package.Service/) before the name: its timeout no longer than the
// overall_timeout as Envoy can say it (1ms at least), nor its stream
// bounds longer than it; a per_try_timeout only when shorter than the
// route's, gateway-error only with one; no hedge_policy.
func checkEnvoyRoundedRoutes(t *testing.T, params, y, prefix string, overall map[string]time.Duration) {
	t.Helper()
	for name, o := range overall {
		route := envoyRouteOf(t, y, prefix+name)
		limit, ok := routeSeconds(t, route, "timeout")
		if !ok || limit <= 0 {
			t.Errorf("%s, %s: no route timeout:\n%s", params, name, route)
			continue
		}
		if want := max(o.Truncate(time.Millisecond), time.Millisecond); limit > want {
			t.Errorf("%s, %s: the route's timeout is %v, longer than the Go client lets the call run (overall_timeout %v; %v as Envoy can say it):\n%s", params, name, limit, o, want, route)
		}
		for _, key := range []string{"grpc_timeout_header_max", "max_stream_duration"} {
			if d, ok := routeSeconds(t, route, key); ok && d > limit {
				t.Errorf("%s, %s: %s %v is longer than the route's timeout %v:\n%s", params, name, key, d, limit, route)
			}
		}
		perTry, hasPerTry := routeSeconds(t, route, "per_try_timeout")
		if hasPerTry && perTry >= limit {
			t.Errorf("%s, %s: per_try_timeout %v is not shorter than the route's timeout %v: the attempts have no timeout of their own at Envoy:\n%s", params, name, perTry, limit, route)
		}
		if strings.Contains(route, "gateway-error") && (!hasPerTry || perTry >= limit) {
			t.Errorf("%s, %s: gateway-error retried without an attempt timeout shorter than the route's: it retries only resets and failed connections, which the Go client does not retry on DEADLINE_EXCEEDED:\n%s", params, name, route)
		}
		if strings.Contains(route, "hedge_policy") {
			t.Errorf("%s, %s: a hedge_policy written:\n%s", params, name, route)
		}
	}
}
