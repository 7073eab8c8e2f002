// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// CheckFileScope refuses a (resilient.v1.file) option in a file that
// declares no service: a file's options are the defaults of the services
// it declares, and only of those (not of its package, nor of the files
// that import it), so there they would apply to nothing, and a reader
// would believe them in force. Its values are not checked: the whole
// option is to go. fd's services are checked by CheckFile.
func CheckFileScope(fd protoreflect.FileDescriptor, add func(Finding)) {
	if fd.Services().Len() > 0 || PolicyOf(fd) == nil {
		return
	}
	add(Finding{RuleScope, LevelFile, "",
		fmt.Sprintf("%s declares no service, and a file's options are the defaults of its own services only (not of its package, nor of the files that import it), so these would apply to nothing: write them in each file that declares the services, or remove them", fd.Path())})
}

// CheckServiceScope refuses a (resilient.v1.service) option on a service
// that declares no method: it would apply to nothing, and the checks that
// relate two of its values (timeout and overall_timeout, the back-offs, a
// minimum deadline and a default timeout) run on a method's policy, so
// its values are not checked either.
func CheckServiceScope(s protoreflect.ServiceDescriptor, add func(Finding)) {
	if s.Methods().Len() > 0 || PolicyOf(s) == nil {
		return
	}
	add(Finding{RuleScope, LevelService, "",
		fmt.Sprintf("%s declares no method, and a service's options are the defaults of its own methods only, so these would apply to nothing: write them once it has methods, or remove them", s.Name())})
}

// CheckService checks the bulkhead and rate limit that a service's
// methods share, resolved from the file and the service (shared): each
// needs its size, which has no sensible default.
func CheckService(shared Merged, add func(Finding)) {
	if shared.Policy.GetBulkhead() != nil {
		requirePermits(shared, add)
	}
	if shared.Policy.GetRateLimit() != nil {
		requireRate(shared, add)
	}
	CheckAdaptive(nil, nil, shared, add)
}

// CheckOwnRateLimit checks a rate_limit written on a method: it needs
// per_method: true (the shared limit is tuned on the service), applies to
// unary calls only, and needs its rate.
func CheckOwnRateLimit(m protoreflect.MethodDescriptor, own *resilientv1.Policy, eff Merged, add func(Finding)) {
	r := own.GetRateLimit()
	if r == nil {
		return
	}
	switch kind := StreamKind(m); {
	case !r.GetPerMethod():
		add(Finding{RuleScope, LevelMethod, "rate_limit",
			"a method's own rate_limit needs per_method: true, which gives the method a token bucket of its own; to tune the limit the service's methods share, move these settings to (resilient.v1.service)"})
	case kind != "":
		add(Finding{RuleScope, LevelMethod, "rate_limit",
			fmt.Sprintf("only unary calls are rate limited, and %s is %s: remove it", m.Name(), kind)})
	default:
		requireRate(eff, add)
	}
}

// CheckOwnBreaker checks a circuit_breaker written on a method: it needs
// per_method: true (the shared breaker is tuned on the service).
func CheckOwnBreaker(own *resilientv1.Policy, add func(Finding)) {
	if cb := own.GetCircuitBreaker(); cb != nil && !cb.GetPerMethod() {
		add(Finding{RuleScope, LevelMethod, "circuit_breaker",
			"a method's own circuit_breaker needs per_method: true, which gives the method a breaker of its own; to tune the breaker the service's methods share, move these settings to (resilient.v1.service)"})
	}
}

// CheckOwnBulkhead checks a bulkhead written on a method: it needs
// per_method: true (the shared bulkhead is tuned on the service), and its
// permits.
func CheckOwnBulkhead(own *resilientv1.Policy, eff Merged, add func(Finding)) {
	bh := own.GetBulkhead()
	switch {
	case bh == nil:
	case !bh.GetPerMethod():
		add(Finding{RuleScope, LevelMethod, "bulkhead",
			"a method's own bulkhead needs per_method: true, which gives the method a bulkhead of its own; to tune the bulkhead the service's methods share, move these settings to (resilient.v1.service)"})
	default:
		requirePermits(eff, add)
	}
}

// requirePermits refuses a bulkhead without permits: there is no sensible
// default for the size of a bulkhead.
func requirePermits(eff Merged, add func(Finding)) {
	if eff.Policy.GetBulkhead().Permits == nil {
		add(Finding{RuleMissingValue, eff.SetBy["bulkhead"], "bulkhead.permits",
			"is required: set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}"})
	}
}

// requireRate refuses a rate limit without a rate: there is no sensible
// default.
func requireRate(eff Merged, add func(Finding)) {
	if eff.Policy.GetRateLimit().RequestsPerSecond == nil {
		add(Finding{RuleMissingValue, eff.SetBy["rate_limit"], "rate_limit.requests_per_second",
			"is required: set the sustained rate of calls allowed, as in rate_limit: {requests_per_second: 200}"})
	}
}
