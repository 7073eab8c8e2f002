// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// CheckMethod runs, in the order the plugin reports them, the checks of
// one method that involve more than one option or the method's
// descriptor. own is the method's (resilient.v1.method) option, nil for
// none; eff is its policy merged from the file, service and method. Check
// on each option is the caller's, before.
func CheckMethod(m protoreflect.MethodDescriptor, own *resilientv1.Policy, eff Merged, add func(Finding)) {
	CheckIdempotency(m, own, add)
	CheckStreamRetry(m, own, add)
	CheckIdempotencyKey(m, own, eff, add)
	if Retries(m, eff) {
		CheckRetrySafe(string(m.Name()), Idempotent(m, eff), Keyed(eff), eff, add)
		CheckBackoff(eff, add)
	}
	CheckTimeouts(eff.Policy.GetTimeout().AsDuration(), eff.Policy.GetOverallTimeout().AsDuration(), eff, add)
	CheckGeneratedKey(m, own, eff, add)
	CheckHedging(m, eff, add)
	CheckOwnRateLimit(m, own, eff, add)
	CheckCache(m, eff, add)
	CheckServer(m, eff, add)
	CheckOwnBreaker(own, add)
	CheckOwnBulkhead(own, eff, add)
	CheckOwnAdaptive(m, own, add)
	CheckAdaptive(m, own, eff, add)
}

// StreamKind describes a streaming method for messages ("a
// server-streaming method"); "" for a unary one.
func StreamKind(m protoreflect.MethodDescriptor) string {
	return check.Kind(m.IsStreamingClient(), m.IsStreamingServer())
}

// IdempotencyLevel is protobuf's own option idempotency_level of a method.
func IdempotencyLevel(m protoreflect.MethodDescriptor) descriptorpb.MethodOptions_IdempotencyLevel {
	switch opts := m.Options().(type) {
	case nil:
		return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	case *descriptorpb.MethodOptions:
		return opts.GetIdempotencyLevel()
	default:
		// Options of another concrete type (dynamicpb): read the field by
		// its name.
		r := opts.ProtoReflect()
		fd := r.Descriptor().Fields().ByName("idempotency_level")
		if fd == nil {
			return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
		}
		return descriptorpb.MethodOptions_IdempotencyLevel(r.Get(fd).Enum())
	}
}

// declaredIdempotent reports whether protobuf's idempotency_level says the
// method may be repeated.
func declaredIdempotent(m protoreflect.MethodDescriptor) bool {
	l := IdempotencyLevel(m)
	return l == descriptorpb.MethodOptions_IDEMPOTENT || l == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}

// Idempotent reports whether a method may be repeated: idempotent: true in
// its merged policy, or option idempotency_level = IDEMPOTENT or
// NO_SIDE_EFFECTS.
func Idempotent(m protoreflect.MethodDescriptor, eff Merged) bool {
	return eff.Policy.GetIdempotent() || declaredIdempotent(m)
}

// Retries reports whether a method is retried: it is unary, and its merged
// policy has a retry whose max_attempts is above 1 (the default is 3). A
// stream ignores the retry it inherits.
func Retries(m protoreflect.MethodDescriptor, eff Merged) bool {
	r := eff.Policy.GetRetry()
	return r != nil && StreamKind(m) == "" && (r.MaxAttempts == nil || r.GetMaxAttempts() > 1)
}

// Keyed reports whether the calls of a unary method carry an idempotency
// key, named (idempotency_key) or generated (generate_idempotency_key).
func Keyed(eff Merged) bool {
	return eff.Policy.GetIdempotencyKey() != "" || eff.Policy.GetGenerateIdempotencyKey()
}

// CheckIdempotency refuses idempotent: false written on a method whose
// protobuf option idempotency_level says it may be repeated.
func CheckIdempotency(m protoreflect.MethodDescriptor, own *resilientv1.Policy, add func(Finding)) {
	if own == nil || own.Idempotent == nil || own.GetIdempotent() || !declaredIdempotent(m) {
		return
	}
	add(Finding{RuleIdempotencyContradiction, LevelMethod, "idempotent",
		fmt.Sprintf("false contradicts option idempotency_level = %s on the same method: remove one of the two", IdempotencyLevel(m))})
}

// CheckStreamRetry refuses a retry written on a streaming method. One that
// it inherits from its service or file is ignored.
func CheckStreamRetry(m protoreflect.MethodDescriptor, own *resilientv1.Policy, add func(Finding)) {
	if msg := check.StreamRetry(string(m.Name()), StreamKind(m)); msg != "" && own.GetRetry() != nil {
		add(Finding{RuleStreamRetry, LevelMethod, "retry",
			msg + ": remove retry (opening the stream still gets the timeout, breaker and bulkhead)"})
	}
}

// CheckBackoff refuses a max_backoff shorter than initial_backoff, once
// defaults are filled in, blaming the more specific of the two settings.
// The caller runs it on a method that retries.
func CheckBackoff(eff Merged, add func(Finding)) {
	r := eff.Policy.GetRetry()
	initial := defaults().GetRetry().GetInitialBackoff().AsDuration()
	if r.GetInitialBackoff() != nil {
		initial = r.GetInitialBackoff().AsDuration()
	}
	maxb := defaults().GetRetry().GetMaxBackoff().AsDuration()
	if r.GetMaxBackoff() != nil {
		maxb = r.GetMaxBackoff().AsDuration()
	}
	if check.MaxBackoff(initial, maxb, "") == "" {
		return
	}
	il, iok := eff.SetBy["retry.initial_backoff"]
	ml, mok := eff.SetBy["retry.max_backoff"]
	if iok && (!mok || il > ml) {
		add(Finding{RuleBackoffOrder, il, "retry.initial_backoff",
			check.InitialBackoff(initial, maxb, eff.Origin("retry.max_backoff", il)).Options()})
		return
	}
	add(Finding{RuleBackoffOrder, ml, "retry.max_backoff",
		check.MaxBackoff(initial, maxb, eff.Origin("retry.initial_backoff", ml)).Options()})
}
