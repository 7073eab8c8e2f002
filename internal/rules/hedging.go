// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
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
	if kind := StreamKind(m); kind != "" {
		add(Finding{RuleHedging, LevelMethod, "hedging",
			fmt.Sprintf("streams are not hedged, and %s is %s: remove hedging", name, kind)})
	} else if !Idempotent(m, eff) {
		add(Finding{RuleHedging, LevelMethod, "hedging",
			fmt.Sprintf("%s is not idempotent, and hedged copies run at the same time, so each could apply it: mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT) if it is, or remove hedging", name)})
	}
	if Retries(m, eff) {
		add(Finding{RuleHedging, LevelMethod, "hedging",
			fmt.Sprintf("%s also retries%s: a method hedges or retries, not both, since hedged copies already repeat the call; remove one, or turn retries off for it with retry: {max_attempts: 1}",
				name, eff.Origin("retry", LevelMethod))})
	}
	delay := h.GetDelay().AsDuration()
	timeout, overall := eff.Policy.GetTimeout().AsDuration(), eff.Policy.GetOverallTimeout().AsDuration()
	if delay > 0 && timeout > 0 && delay >= timeout {
		add(Finding{RuleHedging, LevelMethod, "hedging.delay",
			fmt.Sprintf("%v is not shorter than timeout %v%s: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout",
				delay, timeout, eff.Origin("timeout", LevelMethod))})
	} else if delay > 0 && overall > 0 && delay >= overall {
		add(Finding{RuleHedging, LevelMethod, "hedging.delay",
			fmt.Sprintf("%v is not shorter than overall_timeout %v%s: no copy could be sent before the call ends; shorten the delay (about the p95)",
				delay, overall, eff.Origin("overall_timeout", LevelMethod))})
	}
}
