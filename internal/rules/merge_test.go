// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// TestMerge checks the merge rules on the options contract: field by field,
// sub-messages recursively, repeated fields and durations replaced whole.
func TestMerge(t *testing.T) {
	file := &resilientv1.Policy{
		Idempotent: proto.Bool(true),
		Timeout:    &durationpb.Duration{Seconds: 1},
		Retry: &resilientv1.Retry{
			MaxAttempts:    proto.Uint32(4),
			MaxBackoff:     &durationpb.Duration{Nanos: 5},
			RetryableCodes: []string{"UNAVAILABLE", "RESOURCE_EXHAUSTED"},
		},
	}
	service := &resilientv1.Policy{
		Retry: &resilientv1.Retry{MaxBackoff: &durationpb.Duration{Seconds: 2}},
	}
	method := &resilientv1.Policy{
		Idempotent: proto.Bool(false),
		Retry:      &resilientv1.Retry{RetryableCodes: []string{"DEADLINE_EXCEEDED"}},
	}
	m := Merge(Layer{LevelFile, file}, Layer{LevelService, service}, Layer{LevelMethod, nil}, Layer{LevelMethod, method})
	want := &resilientv1.Policy{
		Idempotent: proto.Bool(false),
		Timeout:    &durationpb.Duration{Seconds: 1},
		Retry: &resilientv1.Retry{
			MaxAttempts:    proto.Uint32(4),
			MaxBackoff:     &durationpb.Duration{Seconds: 2},
			RetryableCodes: []string{"DEADLINE_EXCEEDED"},
		},
	}
	if !proto.Equal(m.Policy, want) {
		t.Errorf("merged\n%v\nwant\n%v", m.Policy, want)
	}
	for path, lvl := range map[string]Level{
		"idempotent":            LevelMethod,
		"timeout":               LevelFile,
		"retry":                 LevelMethod,
		"retry.max_attempts":    LevelFile,
		"retry.max_backoff":     LevelService,
		"retry.retryable_codes": LevelMethod,
	} {
		if got, ok := m.SetBy[path]; !ok || got != lvl {
			t.Errorf("%s set by %v (%v), want %v", path, got.Option(), ok, lvl.Option())
		}
	}
	if m.Has("retry.max_backoff.seconds") {
		t.Error("a duration was merged field by field")
	}
	// The layers are left as they were.
	if file.GetRetry().GetMaxBackoff().GetNanos() != 5 || len(file.GetRetry().GetRetryableCodes()) != 2 {
		t.Errorf("merging changed a layer: %v", file)
	}
}

// ServicePolicy and MethodPolicy read the options of the file, the service
// and the method from their descriptors and merge them in that order,
// recording the level of each value, and give the element's own option.
func TestPolicyOfLevels(t *testing.T) {
	fd := attackFile(t, `timeout: {seconds: 1} retry: {max_attempts: 4}`, `retry: {max_backoff: {seconds: 2}}`, `timeout: {seconds: 3} idempotent: true`, "")
	s := fd.Services().Get(0)
	own, shared := ServicePolicy(s)
	if !proto.Equal(own, attackPolicy(t, `retry: {max_backoff: {seconds: 2}}`)) {
		t.Errorf("service's own option %v", own)
	}
	if want := attackPolicy(t, `timeout: {seconds: 1} retry: {max_attempts: 4 max_backoff: {seconds: 2}}`); !proto.Equal(shared.Policy, want) {
		t.Errorf("shared\n%v\nwant\n%v", shared.Policy, want)
	}
	for path, lvl := range map[string]Level{"timeout": LevelFile, "retry": LevelService, "retry.max_attempts": LevelFile, "retry.max_backoff": LevelService} {
		if got, ok := shared.SetBy[path]; !ok || got != lvl {
			t.Errorf("shared: %s set by %v (%v), want %v", path, got.Option(), ok, lvl.Option())
		}
	}

	own, eff := MethodPolicy(s.Methods().ByName("Get"))
	if !proto.Equal(own, attackPolicy(t, `timeout: {seconds: 3} idempotent: true`)) {
		t.Errorf("Get's own option %v", own)
	}
	if want := attackPolicy(t, `timeout: {seconds: 3} idempotent: true retry: {max_attempts: 4 max_backoff: {seconds: 2}}`); !proto.Equal(eff.Policy, want) {
		t.Errorf("Get\n%v\nwant\n%v", eff.Policy, want)
	}
	for path, lvl := range map[string]Level{"timeout": LevelMethod, "idempotent": LevelMethod, "retry.max_attempts": LevelFile, "retry.max_backoff": LevelService} {
		if got, ok := eff.SetBy[path]; !ok || got != lvl {
			t.Errorf("Get: %s set by %v (%v), want %v", path, got.Option(), ok, lvl.Option())
		}
	}

	// A method without an option of its own has the service's policy.
	own, eff = MethodPolicy(s.Methods().ByName("Watch"))
	if own != nil || !proto.Equal(eff.Policy, shared.Policy) || len(eff.SetBy) != len(shared.SetBy) {
		t.Errorf("Watch: own %v, policy %v (%v), want none and the shared %v (%v)", own, eff.Policy, eff.SetBy, shared.Policy, shared.SetBy)
	}
}
