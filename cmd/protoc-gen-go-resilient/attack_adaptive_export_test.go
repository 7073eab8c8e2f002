// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// envoyFilterLines renders the Envoy adaptive filters of sp.
func envoyFilterLines(sp *policy.Service) []string {
	var lines []string
	envoyAdaptiveFilters(func(indent int, format string, args ...any) {
		lines = append(lines, strings.Repeat("  ", indent)+fmt.Sprintf(format, args...))
	}, "t.Dep", sp)
	return lines
}

// envoyField returns the value of the first line that sets key, without
// its comment.
func envoyField(t *testing.T, lines []string, key string) string {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+":"); ok {
			v, _, _ = strings.Cut(v, "#")
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in\n%s", key, strings.Join(lines, "\n"))
	return ""
}

// TestAttackEnvoyAdaptiveExportMeansWhatTheLimitMeans: the adaptive
// concurrency filter must carry values Envoy accepts and that mean there
// what they mean in the runtime:
//
//   - min_rtt_calc_params.interval must be at least 1 ms (Envoy's
//     validation refuses less); a baseline_window the runtime accepts
//     (≥ 10 ns) below it is written as 1 ms, said so in a comment;
//   - Envoy holds its limit at min_rtt_calc_params.min_concurrency (3 by
//     default) while it measures its baseline, whatever
//     max_concurrency_limit: under a max_limit of 1 or 2 (a bulkhead of as
//     many permits) the default would let 3 requests through every
//     interval, so min_concurrency is written as the max_limit.
func TestAttackEnvoyAdaptiveExportMeansWhatTheLimitMeans(t *testing.T) {
	sp := &policy.Service{
		Bulkhead:      &policy.Bulkhead{Permits: 2},
		AdaptiveLimit: &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 100, InitialLimit: 2, Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 100 * time.Microsecond},
	}
	lines := envoyFilterLines(sp)
	iv := envoyField(t, lines, "interval")
	d, err := time.ParseDuration(iv)
	if err != nil || d < time.Millisecond {
		t.Errorf("min_rtt_calc_params.interval %q (%v): Envoy refuses an interval under 1 ms", iv, err)
	}
	if got := envoyField(t, lines, "max_concurrency_limit"); got != "2" {
		t.Errorf("max_concurrency_limit %s under 2 permits, want 2", got)
	}
	mc := "3 (Envoy's default: not written)"
	for _, l := range lines {
		if strings.Contains(l, "min_concurrency:") {
			mc = envoyField(t, lines, "min_concurrency")
		}
	}
	if n, err := strconv.Atoi(mc); err != nil || n > 2 {
		t.Errorf("min_rtt_calc_params.min_concurrency %s above max_concurrency_limit 2: Envoy lets that many through while it measures its baseline", mc)
	}

	// The defaults stay as they were: 30 s, and Envoy's own min_concurrency
	// under a max_limit of 3 or more.
	sp = &policy.Service{AdaptiveLimit: &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 100, InitialLimit: 20, Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}}
	lines = envoyFilterLines(sp)
	if iv := envoyField(t, lines, "interval"); iv != "30s" {
		t.Errorf("interval %s for the default baseline window, want 30s", iv)
	}
	for _, l := range lines {
		if strings.Contains(l, "min_concurrency:") {
			t.Errorf("min_concurrency written under a max_limit of 100: %s", l)
		}
	}
}
