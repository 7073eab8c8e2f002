// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package envoytest

import "testing"

// TestAttackMixedSafetyRoutes matches requests, as Envoy does, against the
// routes of a service of mixed safety whose retries are inherited from the
// file and the service (testdata/export/attack_mixed.proto): a request
// without the key, or with an empty one, to a method that is not
// idempotent reaches a route without retries; with a key, the retried
// route; idempotent methods are retried either way; streams never.
func TestAttackMixedSafetyRoutes(t *testing.T) {
	routes := routesOf(t, "../testdata/golden/attack_mixed.envoy.yaml.golden")
	const svc = "/attack.mixed_pkg.v1.Mixed_Service/"
	for _, tc := range []struct {
		method           string
		retriedWithKey   bool
		retriedWithout   bool
		timeoutWithoutMs int64 // the route's timeout for a request without a key
	}{
		{"Read_NoSideEffects", true, true, 2000},
		{"ReadFlag", true, true, 2000},
		{"Write_Plain", false, false, 100},
		{"WriteKeyed", true, false, 100},
		{"WriteGenerated", true, false, 100},
		{"Watch", false, false, 2000},
		{"Upload", false, false, 2000},
		{"Chat", false, false, 2000},
	} {
		path := svc + tc.method
		for _, h := range []struct {
			name    string
			headers map[string]string
			retried bool
		}{
			{"no key", nil, tc.retriedWithout},
			{"empty key", map[string]string{"idempotency-key": ""}, tc.retriedWithout},
			{"other header", map[string]string{"x-idempotency-key": "k"}, tc.retriedWithout},
			{"key", map[string]string{"idempotency-key": "op-1"}, tc.retriedWithKey},
		} {
			r := match(t, routes, path, h.headers)
			if r == nil {
				t.Errorf("%s, %s: no route", tc.method, h.name)
				continue
			}
			if got := r.GetRoute().GetRetryPolicy() != nil; got != h.retried {
				t.Errorf("%s, %s: route %q retried %v, want %v", tc.method, h.name, r.GetName(), got, h.retried)
			}
			if h.headers["idempotency-key"] == "" {
				if got := r.GetRoute().GetTimeout().AsDuration().Milliseconds(); got != tc.timeoutWithoutMs {
					t.Errorf("%s, %s: route timeout %dms, want %dms (the Go client's bound of such a call)", tc.method, h.name, got, tc.timeoutWithoutMs)
				}
			}
		}
	}
}
