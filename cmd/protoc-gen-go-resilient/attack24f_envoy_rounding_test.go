// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// routeSeconds is the value of the first "key: Ns" of route, 0 and false
// without one.
func routeSeconds(t *testing.T, route, key string) (time.Duration, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + key + `: ([0-9.]+)s\b`).FindStringSubmatch(route)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1] + "s")
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return d, true
}

// TestAttack24fEnvoyRoundingKeepsTheOverallBound: Envoy reads its
// timeouts in whole milliseconds, and the export rounded every one up,
// the route's too. A method of timeout 300µs and overall_timeout 900µs
// became a per_try_timeout of 1ms under a route timeout of 1ms: the
// attempts' own timeout, which the policy has shorter than the call's,
// was the call's, and DEADLINE_EXCEEDED was still mapped to
// gateway-error, which then retries only what the Go client does not (a
// reset, a failed connection). And an overall_timeout of 1.5ms was a
// route of 2ms, longer than the Go client ever lets the call run
// (internal/bound: the overall_timeout, whatever the attempts). Now the
// route of a method with an overall_timeout is never longer than it (cut
// to the whole millisecond below, 1ms at least), and a per_try_timeout
// is written, and gateway-error retried, only when it is shorter than
// the route's timeout as Envoy reads both.
func TestAttack24fEnvoyRoundingKeepsTheOverallBound(t *testing.T) {
	src := `syntax = "proto3";
package attack24f.round;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack24f/round";
service S {
  rpc A(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 300000}, overall_timeout: {nanos: 900000}, retry: {max_attempts: 2, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc B(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1200000}, overall_timeout: {nanos: 1500000}, retry: {max_attempts: 3, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc C(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1500000}, overall_timeout: {nanos: 2500000}, retry: {max_attempts: 3, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc D(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {overall_timeout: {nanos: 1500000}};
  }
  rpc E(M) returns (stream M) {
    option (resilient.v1.method) = {timeout: {nanos: 1200000}, overall_timeout: {nanos: 2500000}};
  }
  rpc F(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1200000}, overall_timeout: {nanos: 3500000}, retry: {max_attempts: 3, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
}
message M {}
`
	overall := map[string]time.Duration{"A": 900 * time.Microsecond, "B": 1500 * time.Microsecond, "C": 2500 * time.Microsecond,
		"D": 1500 * time.Microsecond, "E": 2500 * time.Microsecond, "F": 3500 * time.Microsecond}
	for _, params := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "round.proto", src, params)
		if perr != "" {
			t.Fatal(perr)
		}
		y := files["attack24f/round/round.envoy.yaml"]
		checkEnvoyRoundedRoutes(t, params, y, "attack24f.round.S/", overall)
		if params == "envoy=true" {
			// F keeps a retry on an expired attempt: 2ms of 3ms.
			f := envoyRouteOf(t, y, "attack24f.round.S/F")
			if !strings.Contains(f, "per_try_timeout: 0.002s") || !strings.Contains(f, "gateway-error") || !strings.Contains(f, "timeout: 0.003s") {
				t.Errorf("F's attempts, 2ms in a route of 3ms, lost their timeout or their retry on it:\n%s", f)
			}
		}
	}
}
