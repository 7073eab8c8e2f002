// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// TestAdaptiveBoundsBlameTheMoreSpecificLevel: min_limit and max_limit out
// of order are reported at the one written at the more specific level,
// naming where the other was set; at min_limit when both are written at
// the same level, as the Go validator reports them.
func TestAdaptiveBoundsBlameTheMoreSpecificLevel(t *testing.T) {
	own := func(a *resilientv1.AdaptiveLimit) *resilientv1.Policy {
		a.PerMethod = proto.Bool(true)
		return &resilientv1.Policy{AdaptiveLimit: a}
	}
	for _, tc := range []struct {
		name string
		opts options
		want string
	}{
		{"max on the method", options{svc: &resilientv1.Policy{Timeout: sec(time.Second), AdaptiveLimit: &resilientv1.AdaptiveLimit{MinLimit: u32(10)}},
			get: own(&resilientv1.AdaptiveLimit{MaxLimit: u32(5)})},
			"Get: adaptive_limit.max_limit: 5 is below min_limit 10 (set in (resilient.v1.service)): raise max_limit or lower min_limit"},
		{"min on the method", options{svc: &resilientv1.Policy{Timeout: sec(time.Second), AdaptiveLimit: &resilientv1.AdaptiveLimit{MaxLimit: u32(5)}},
			get: own(&resilientv1.AdaptiveLimit{MinLimit: u32(10)})},
			"Get: adaptive_limit.min_limit: 10 is above max_limit 5 (set in (resilient.v1.service)): lower min_limit or raise max_limit"},
		{"both on the method", options{svc: &resilientv1.Policy{Timeout: sec(time.Second)},
			get: own(&resilientv1.AdaptiveLimit{MinLimit: u32(10), MaxLimit: u32(5)})},
			"Get: adaptive_limit.min_limit: 10 is above max_limit 5: lower min_limit or raise max_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := optionFindings(t, tc.opts)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("options checks found:\n%s\nwant only %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

// TestAdaptiveWindowsAreValidDurations: a window of the adaptive layers
// that is not a valid Duration is refused as such, as every other
// duration option is, not read as the nanoseconds it happens to add up to.
func TestAdaptiveWindowsAreValidDurations(t *testing.T) {
	bad := &durationpb.Duration{Seconds: 1, Nanos: -5}
	for _, tc := range []struct {
		opts options
		want string
	}{
		{options{svc: &resilientv1.Policy{Timeout: sec(time.Second), AdaptiveLimit: &resilientv1.AdaptiveLimit{BaselineWindow: bad}}},
			": adaptive_limit.baseline_window: is not a valid duration: seconds 1 and nanos -5 must have the same sign"},
		{options{svc: &resilientv1.Policy{ClientThrottle: &resilientv1.ClientThrottle{Window: bad}}},
			": client_throttle.window: is not a valid duration: seconds 1 and nanos -5 must have the same sign"},
	} {
		got := optionFindings(t, tc.opts)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("options checks found:\n%s\nwant only %q", strings.Join(got, "\n"), tc.want)
		}
	}
}
