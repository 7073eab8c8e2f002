// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/check"
)

// TestBlamesAgree: each check of two values is written twice, once
// blaming each value (the options blame the one set at the more specific
// level); both refuse exactly the same pairs, and refuse some.
func TestBlamesAgree(t *testing.T) {
	ds := []time.Duration{-time.Second, 0, time.Nanosecond, time.Millisecond, time.Second}
	ns := []int64{-1, 0, 1, 2, 20, 21}
	for _, pair := range []struct {
		name string
		a, b func(x, y int) string
		xs   int
	}{
		{"backoff", func(x, y int) string { return string(check.MaxBackoff(ds[x], ds[y], "")) },
			func(x, y int) string { return string(check.InitialBackoff(ds[x], ds[y], "")) }, len(ds)},
		{"timeouts", func(x, y int) string { return string(check.Timeout(ds[x], ds[y], "")) },
			func(x, y int) string { return string(check.OverallTimeout(ds[x], ds[y], "")) }, len(ds)},
		{"window calls", func(x, y int) string { return string(check.WindowBelowMinimum(ns[x], ns[y], "")) },
			func(x, y int) string { return check.MinimumAboveWindow(ns[x], ns[y]) }, len(ns)},
		{"adaptive bounds", func(x, y int) string { return string(check.MinAboveMax(ns[x], ns[y], "")) },
			func(x, y int) string { return string(check.MaxBelowMin(ns[x], ns[y], "")) }, len(ns)},
	} {
		refused := 0
		for x := 0; x < pair.xs; x++ {
			for y := 0; y < pair.xs; y++ {
				a, b := pair.a(x, y), pair.b(x, y)
				if (a == "") != (b == "") {
					t.Errorf("%s %d, %d: one blame refuses (%q), the other not (%q)", pair.name, x, y, a, b)
				}
				if a != "" {
					refused++
				}
			}
		}
		if refused == 0 {
			t.Errorf("%s: no pair refused", pair.name)
		}
	}
}
