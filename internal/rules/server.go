// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// DedupMinimum returns the problem of a dedup ttl below its minimum, or
// of a lease outside its bounds (below the minimum or above the maximum),
// "" when d is not positive, or fine, in the words Check refuses it with,
// for the override loader, which sets a server method's values one by
// one.
func DedupMinimum(field string, d time.Duration) string {
	if d <= 0 || (field != "ttl" && field != "lease") {
		return ""
	}
	dedup := &resilientv1.Dedup{}
	if field == "ttl" {
		dedup.Ttl = durationpb.New(d)
	} else {
		dedup.Lease = durationpb.New(d)
	}
	msg := ""
	Check(&resilientv1.Policy{Server: &resilientv1.Server{Dedup: dedup}}, true, func(path, format string, args ...any) {
		if path == "server.dedup."+field {
			msg = fmt.Sprintf(format, args...)
		}
	})
	return msg
}

// CheckServer checks the server-side settings of a method: a
// default_timeout no shorter than min_deadline (or every request without
// deadline would be refused as dead), blaming the more specific of the
// two; and deduplication only of unary requests that carry an idempotency
// key, with its ttl (whose value Check checks where it is written).
func CheckServer(m protoreflect.MethodDescriptor, eff Merged, add func(Finding)) {
	sv := eff.Policy.GetServer()
	minDeadline, defaultTimeout := sv.GetMinDeadline().AsDuration(), sv.GetDefaultTimeout().AsDuration()
	if defaultTimeout > 0 && minDeadline > 0 && defaultTimeout < minDeadline {
		dl, ml := eff.SetBy["server.default_timeout"], eff.SetBy["server.min_deadline"]
		if ml > dl {
			add(Finding{RuleServer, ml, "server.min_deadline",
				fmt.Sprintf("%v is longer than default_timeout %v%s: a request without deadline would be refused as dead; shorten min_deadline or lengthen default_timeout",
					minDeadline, defaultTimeout, eff.Origin("server.default_timeout", ml))})
		} else {
			add(Finding{RuleServer, dl, "server.default_timeout",
				fmt.Sprintf("%v is shorter than min_deadline %v%s: a request without deadline would be refused as dead; lengthen default_timeout or shorten min_deadline",
					defaultTimeout, minDeadline, eff.Origin("server.min_deadline", dl))})
		}
	}
	d := sv.GetDedup()
	if d == nil {
		return
	}
	lvl := eff.SetBy["server.dedup"]
	switch kind := StreamKind(m); {
	case kind != "":
		add(Finding{RuleServer, lvl, "server.dedup",
			fmt.Sprintf("only unary requests are deduplicated, and %s is %s: remove dedup", m.Name(), kind)})
	case !Keyed(eff):
		add(Finding{RuleServer, lvl, "server.dedup",
			fmt.Sprintf("%s sends no idempotency key, so the server could not recognise a repeat: name a request field in idempotency_key, set generate_idempotency_key: true, or remove dedup", m.Name())})
	case d.GetTtl() == nil:
		add(Finding{RuleMissingValue, lvl, "server.dedup.ttl",
			"is required: set how long a result is kept and replayed, as in dedup: {ttl: {seconds: 86400}}"})
	}
}

// CheckShedding checks the shedding limits a service resolves from the
// file and the service (shared), together (SheddingLimits): a limit left
// unset is blamed on the option that sets shedding.
func CheckShedding(shared Merged, add func(Finding)) {
	sh := shared.Policy.GetShedding()
	if sh == nil {
		return
	}
	report := func(rule string) Report {
		return func(path, format string, args ...any) {
			lvl, ok := shared.SetBy[path]
			if !ok {
				lvl = shared.SetBy["shedding"]
			}
			add(Finding{rule, lvl, path, fmt.Sprintf(format, args...)})
		}
	}
	sheddingLimits(sh.Low, sh.Normal, sh.High, sh.Critical, report(RuleMissingValue), report(RuleServer))
}
