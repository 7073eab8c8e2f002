// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/check"
)

// CheckHedging checks the hedging of a method, written on it (elsewhere
// Check refuses it): it needs its delay; it hedges idempotent unary calls
// only, which do not also retry; and its delay is shorter than the
// method's timeouts, or no copy could be sent.
func CheckHedging(m protoreflect.MethodDescriptor, eff Merged, add func(Finding)) {
	h := eff.Policy.GetHedging()
	if h == nil || eff.SetBy["hedging"] != LevelMethod {
		return
	}
	name := m.Name()
	if h.Delay == nil {
		add(Finding{RuleMissingValue, LevelMethod, "hedging.delay",
			"is required: set how long to wait for an answer before sending the next copy, about the method's observed p95, as in hedging: {delay: {nanos: 80000000}}"})
	}
	if msg := check.StreamHedging(string(name), StreamKind(m)); msg != "" {
		add(Finding{RuleHedging, LevelMethod, "hedging", msg + ": remove hedging"})
	} else if msg := check.HedgingIdempotent(string(name), Idempotent(m, eff)); msg != "" {
		add(Finding{RuleHedging, LevelMethod, "hedging",
			msg + ": mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT) if it is, or remove hedging"})
	}
	if msg := check.HedgingRetries(string(name), Retries(m, eff), eff.Origin("retry", LevelMethod)); msg != "" {
		add(Finding{RuleHedging, LevelMethod, "hedging",
			msg + "; remove one, or turn retries off for it with retry: {max_attempts: 1}"})
	}
	p := eff.Policy
	if msg := check.HedgingDelay(h.GetDelay().AsDuration(), p.GetTimeout().AsDuration(), p.GetOverallTimeout().AsDuration(),
		eff.Origin("timeout", LevelMethod), eff.Origin("overall_timeout", LevelMethod)).Options(); msg != "" {
		add(Finding{RuleHedging, LevelMethod, "hedging.delay", msg})
	}
}
