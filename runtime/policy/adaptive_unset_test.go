// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAdaptiveMendsSayTheDefaultInForce: a refused max_limit or
// initial_limit is mended by leaving it 0, and the mend says what that
// gives as the runtime's limiter builds it: max_limit's default is 100,
// or the bulkhead's permits when fewer; initial_limit's is 20 held
// between the bounds in force. Each number the mend names is the limiter's
// own, under no bulkhead and under bulkheads below and above 100.
func TestAdaptiveMendsSayTheDefaultInForce(t *testing.T) {
	for _, permits := range []int{0, 1, 8, 99, 100, 200} {
		var b *policy.Bulkhead
		if permits > 0 {
			b = &policy.Bulkhead{Permits: permits}
		}
		t.Run(fmt.Sprintf("permits %d", permits), func(t *testing.T) {
			// The limit in force when max_limit is left 0.
			q := adaptive.Policy{}
			if b != nil {
				q = q.WithCeiling(b.Permits)
			}
			l, err := adaptive.New(q, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			max := l.Policy().MaxLimit
			s := policy.Service{Name: "t.Svc", Bulkhead: b, AdaptiveLimit: &policy.AdaptiveLimit{MaxLimit: 1 << 21}}
			msg := problemAt(t, s, "AdaptiveLimit.MaxLimit")
			_, mend, ok := strings.Cut(msg, "; leave it 0 ")
			if !ok {
				t.Fatalf("no mend: %s", msg)
			}
			words := strings.Fields(mend)
			if !slices.Contains(words, fmt.Sprint(max)) {
				t.Errorf("max_limit left 0 is %d in force, the mend says %q", max, mend)
			}
			if max != policy.DefaultAdaptiveLimit.MaxLimit && slices.Contains(words, fmt.Sprint(policy.DefaultAdaptiveLimit.MaxLimit)) {
				t.Errorf("max_limit left 0 is the bulkhead's %d, the mend says %q", max, mend)
			}
		})
	}
	// initial_limit left 0: 20, or the bound nearer it.
	for _, tc := range []struct{ lo, hi, want int }{{0, 0, 20}, {1, 10, 10}, {30, 50, 30}, {5, 50, 20}} {
		a := policy.AdaptiveLimit{MinLimit: tc.lo, MaxLimit: tc.hi}
		l, err := adaptive.New(adaptive.Policy(a), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Limit(); got != tc.want {
			t.Fatalf("limits %d..%d: the limiter starts at %d, the case says %d", tc.lo, tc.hi, got, tc.want)
		}
		a.InitialLimit = -1
		msg := problemAt(t, policy.Service{Name: "t.Svc", AdaptiveLimit: &a}, "AdaptiveLimit.InitialLimit")
		d := policy.DefaultAdaptiveLimit.InitialLimit
		if want := fmt.Sprintf("; leave it 0 for the default %d (or the nearer of MinLimit and MaxLimit when %d is outside them)", d, d); !strings.HasSuffix(msg, want) {
			t.Errorf("limits %d..%d: initial_limit's mend %q, want it to end %q", tc.lo, tc.hi, msg, want)
		}
	}
}

// TestAdaptiveMendsAsWritten: checked as an options author writes one
// level (GroupProblems, the plugin's and the override loader's check of a
// value on its own), the bulkhead is not known, so the mend names both
// defaults.
func TestAdaptiveMendsAsWritten(t *testing.T) {
	for _, pr := range policy.GroupProblems(&policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 0, InitialLimit: 0, Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: time.Second}) {
		switch pr.Key {
		case "max_limit":
			if want := "for the default 100, or the bulkhead's permits if fewer"; pr.Unset != want {
				t.Errorf("max_limit: Unset %q, want %q", pr.Unset, want)
			}
		case "initial_limit":
			if want := "for the default 20 (or the nearer of min_limit and max_limit when 20 is outside them)"; pr.Unset != want {
				t.Errorf("initial_limit: Unset %q, want %q", pr.Unset, want)
			}
		default:
			t.Errorf("unexpected problem %+v", pr)
		}
	}
}

// problemAt returns the message of the one problem of s at field.
func problemAt(t *testing.T, s policy.Service, field string) string {
	t.Helper()
	var found []string
	for _, pr := range s.Problems() {
		if pr.Field == field {
			found = append(found, pr.Message)
		}
	}
	if len(found) != 1 {
		t.Fatalf("problems at %s: %q, want one; all: %+v", field, found, s.Problems())
	}
	return found[0]
}
