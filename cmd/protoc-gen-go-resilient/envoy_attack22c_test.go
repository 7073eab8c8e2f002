// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttack22cEnvoyRouteTimeoutHoldsEnvoysBackoffs: with envoy_retries=envoy
// a request through the route is the whole call, Envoy's retries included,
// so the route's timeout must let Envoy's last attempt run its
// per_try_timeout. Envoy's back-off before its Nth retry is drawn below
// (2^N − 1) × base_interval, capped at max_interval (its fully jittered
// back-off: 1, 3, 7, 15 × base), not below base × 2^(N−1) as the runtime's:
// a timeout summed with the runtime's bounds cuts Envoy's last attempt
// before its per_try_timeout.
func TestAttack22cEnvoyRouteTimeoutHoldsEnvoysBackoffs(t *testing.T) {
	for _, c := range []struct {
		name, retry string
		want        string // attempts × per_try_timeout + Envoy's longest back-offs
	}{
		// 3 × 200 ms + 50 ms + 150 ms (the runtime's bounds: 50 + 100).
		{"uncapped", "max_attempts: 3, initial_backoff: {nanos: 50000000}, max_backoff: {seconds: 1}", "0.800s"},
		// 4 × 200 ms + 100 + 250 + 250 ms (the cap reached at the second).
		{"capped", "max_attempts: 4, initial_backoff: {nanos: 100000000}, max_backoff: {nanos: 250000000}", "1.400s"},
		// Envoy ignores the multiplier: 3 × 200 ms + 10 + 30 ms.
		{"multiplier 1", "max_attempts: 3, initial_backoff: {nanos: 10000000}, max_backoff: {seconds: 1}, backoff_multiplier: 1", "0.640s"},
	} {
		src := fmt.Sprintf(`syntax = "proto3";
package attack22c.envoy;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack22c/envoy";
service S {
  rpc Get(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 200000000}, retry: {%s}};
  }
}
message M {}
`, c.retry)
		files, perr := attackProto(t, "e.proto", src, "envoy=true")
		if perr != "" {
			t.Fatalf("%s: %s", c.name, perr)
		}
		y := files["attack22c/envoy/e.envoy.yaml"]
		start, end := strings.Index(y, "- name: attack22c.envoy.S/Get"), strings.Index(y, "retry_policy:")
		if start < 0 || end < start {
			t.Fatalf("%s: no retried route for Get in:\n%s", c.name, y)
		}
		route := y[start:end]
		if !strings.Contains(route, "timeout: "+c.want+" #") || !strings.Contains(route, "grpc_timeout_header_max: "+c.want+" #") {
			t.Errorf("%s: the route's timeout is not %s, what Envoy's own retries may take:\n%s", c.name, c.want, route)
		}
	}
}

// TestEnvoyRouteOfAHedgedMethodIsOneAttempts: Envoy does not hedge, so a
// hedged method's route through Envoy is one request of one attempt's
// timeout (0.200s), not the hedged call's bound (the copies' delays and
// the last copy's timeout: 0.300s), Envoy retrying or not, with
// retry.max_attempts 1 written beside the hedging (a method hedges or
// retries; the plugin resolves that retry to none).
func TestEnvoyRouteOfAHedgedMethodIsOneAttempts(t *testing.T) {
	for _, opt := range []string{"envoy=true", "envoy=true,envoy_retries=envoy"} {
		src := `syntax = "proto3";
package attack22c.envoyhedge;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack22c/envoyhedge";
service S {
  rpc Get(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 200000000}, retry: {max_attempts: 1},
      hedging: {delay: {nanos: 50000000}, max_copies: 3}};
  }
}
message M {}
`
		files, perr := attackProto(t, "h.proto", src, opt)
		if perr != "" {
			t.Fatalf("%s: %s", opt, perr)
		}
		y := files["attack22c/envoyhedge/h.envoy.yaml"]
		start := strings.Index(y, "- name: attack22c.envoyhedge.S/Get")
		if start < 0 {
			t.Fatalf("%s: no route for Get in:\n%s", opt, y)
		}
		route := y[start:]
		if end := strings.Index(route[1:], "- name:"); end >= 0 {
			route = route[:end+1]
		}
		if !strings.Contains(route, "timeout: 0.200s #") {
			t.Errorf("%s: the route's timeout is not one attempt's 0.200s:\n%s", opt, route)

		}
	}
}
