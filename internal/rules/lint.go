// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// The stable IDs of the rules, as buf lint names them
// (cmd/buf-plugin-resilient) and as its configuration refers to them.
const (
	// RuleInvalidValue: a value the contract does not allow (Check): a
	// ratio outside (0, 1], a negative duration, an unknown or answer code,
	// a retry_budget on a method, …
	RuleInvalidValue = "RESILIENT_INVALID_VALUE"
	// RuleRetryNotIdempotent: retries on a method that is neither
	// idempotent nor keyed.
	RuleRetryNotIdempotent = "RESILIENT_RETRY_NOT_IDEMPOTENT"
	// RuleTimeoutExceedsOverall: a per-attempt timeout longer than the
	// overall limit of the call.
	RuleTimeoutExceedsOverall = "RESILIENT_TIMEOUT_EXCEEDS_OVERALL"
	// RuleMissingValue: a setting without a sensible default left unset
	// once the levels are merged: bulkhead.permits,
	// rate_limit.requests_per_second, hedging.delay, cache.fresh_ttl and
	// cache.key_fields, server.dedup.ttl, a shedding limit.
	RuleMissingValue = "RESILIENT_MISSING_VALUE"
	// RuleKeyField: an idempotency key that cannot be sent: idempotency_key
	// naming a field that does not exist or is not a singular string,
	// bytes or integer field, or an idempotency key (named or generated)
	// written on a streaming method.
	RuleKeyField = "RESILIENT_KEY_FIELD"
	// RuleIdempotencyContradiction: two settings that contradict each
	// other about idempotency: idempotent: false beside protobuf's
	// idempotency_level, or idempotency_key and generate_idempotency_key
	// written at different levels.
	RuleIdempotencyContradiction = "RESILIENT_IDEMPOTENCY_CONTRADICTION"
	// RuleStreamRetry: retry written on a streaming method.
	RuleStreamRetry = "RESILIENT_STREAM_RETRY"
	// RuleBackoffOrder: a max_backoff shorter than initial_backoff, across
	// levels and defaults.
	RuleBackoffOrder = "RESILIENT_BACKOFF_ORDER"
	// RuleScope: a setting written where it does not apply: a method's
	// own circuit_breaker, bulkhead, rate_limit or adaptive_limit without
	// per_method: true, a rate_limit on a streaming method, or a
	// (resilient.v1.file) option in a file that declares no service.
	RuleScope = "RESILIENT_SCOPE"
	// RuleHedging: hedging on a method that is not idempotent, retries, is
	// a stream, or whose delay is not shorter than its timeouts.
	RuleHedging = "RESILIENT_HEDGING"
	// RuleCache: a cache on a method that is not an idempotent unary call
	// or has no timeout, or keyed by fields that do not exist or are not
	// singular string, bytes or integer fields.
	RuleCache = "RESILIENT_CACHE"
	// RuleServer: a server.default_timeout shorter than min_deadline,
	// deduplication on a stream or on a method that sends no idempotency
	// key, shedding limits out of order.
	RuleServer = "RESILIENT_SERVER"
	// RuleNoTimeout: a method without any timeout. Lint only, off by
	// default: the plugin accepts such a method (the caller's deadline
	// still bounds it).
	RuleNoTimeout = "RESILIENT_NO_TIMEOUT"
)

// Finding is one problem of a policy: the rule, the level whose option is
// to blame, the field path inside it, and what is wrong and how to mend it.
type Finding struct {
	Rule    string
	Level   Level
	Path    string
	Message string
}

// CheckRetrySafe refuses the retries of a method that is neither
// idempotent nor keyed (an idempotency key, named or generated): a retry
// could apply it twice. eff is the method's merged policy, whose SetBy
// says where retry was written. The plugin calls it for every method that
// retries; so does CheckFile.
func CheckRetrySafe(method string, idempotent, keyed bool, eff Merged, add func(Finding)) {
	msg := check.RetrySafe(method, idempotent, keyed).Options()
	if msg == "" {
		return
	}
	lvl := eff.SetBy["retry"]
	fix := "mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or remove retry"
	if lvl != LevelMethod {
		fix = "mark the method idempotent (idempotent: true, or option idempotency_level = IDEMPOTENT), name a request field in idempotency_key, or turn retries off for it with (resilient.v1.method) = {retry: {max_attempts: 1}}"
	}
	add(Finding{RuleRetryNotIdempotent, lvl, "retry", msg + ": " + fix})
}

// CheckTimeouts refuses a per-attempt timeout longer than the overall
// timeout (both resolved, 0 for none), blaming the one written at the more
// specific level.
func CheckTimeouts(timeout, overall time.Duration, eff Merged, add func(Finding)) {
	if check.Timeout(timeout, overall, "") == "" {
		return
	}
	tl, ol := eff.SetBy["timeout"], eff.SetBy["overall_timeout"]
	if ol > tl {
		add(Finding{RuleTimeoutExceedsOverall, ol, "overall_timeout",
			check.OverallTimeout(timeout, overall, eff.Origin("timeout", ol)).Options() + "; lengthen overall_timeout or shorten timeout"})
		return
	}
	add(Finding{RuleTimeoutExceedsOverall, tl, "timeout",
		check.Timeout(timeout, overall, eff.Origin("overall_timeout", tl)).Options() + "; shorten timeout or lengthen overall_timeout"})
}

// CheckFile runs every rule above over the services of a file, the one
// pass both the plugin and the buf check plugin make: CheckFileScope on a
// file without services and CheckServiceScope on a service without
// methods; Check on every option; CheckService, CheckMethod and CheckShedding on the policies
// resolved from them (the file's, service's and method's options merged
// field by field: ServicePolicy, MethodPolicy, as the plugin resolves
// them); and RuleNoTimeout, which only lint reports (the plugin
// drops it). Each finding comes with the descriptor it is reported at (the
// file, a service or a method); a value of the service or the file found
// wrong in the same words for several methods or services is reported
// once, naming them (once.go). The policies are read with PolicyOf; a
// value of a newer contract that they cannot hold is NewerOptions' to
// find (newer.go), which each program words as its own.
func CheckFile(fd protoreflect.FileDescriptor, add func(protoreflect.Descriptor, Finding)) {
	// Every finding goes through once, which groups those of a value
	// found wrong for several of the elements that inherit it.
	found := &once{file: fd}
	report := func(d protoreflect.Descriptor, lvl Level, onMethod bool, p *resilientv1.Policy) {
		Check(p, onMethod, func(path, format string, args ...any) {
			found.add(d, Finding{RuleInvalidValue, lvl, path, fmt.Sprintf(format, args...)})
		})
	}
	if fd.Services().Len() > 0 {
		report(fd, LevelFile, false, PolicyOf(fd))
	}
	CheckFileScope(fd, func(f Finding) { found.add(fd, f) })
	for i := 0; i < fd.Services().Len(); i++ {
		s := fd.Services().Get(i)
		if s.Methods().Len() == 0 {
			CheckServiceScope(s, func(f Finding) { found.add(s, f) })
			continue
		}
		svcPolicy, shared := ServicePolicy(s)
		report(s, LevelService, false, svcPolicy)
		atService := func(f Finding) { found.add(s, f) }
		CheckService(shared, atService)
		for j := 0; j < s.Methods().Len(); j++ {
			m := s.Methods().Get(j)
			own, eff := MethodPolicy(m)
			report(m, LevelMethod, true, own)
			at := func(f Finding) { found.add(m, f) }
			CheckMethod(m, own, eff, at)
			if p := eff.Policy; p.GetTimeout() == nil && p.GetOverallTimeout() == nil {
				at(Finding{RuleNoTimeout, LevelMethod, "timeout",
					fmt.Sprintf("%s has no timeout: a call waits as long as the caller's deadline allows, and for ever without one; set timeout (one attempt) or overall_timeout (the whole call) here, on the service or on the file", m.Name())})
			}
		}
		CheckShedding(shared, atService)
	}
	found.flush(add)
}
