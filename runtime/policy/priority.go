// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"

	"github.com/go-resilient/resilient/runtime/internal/priority"
)

// Priority is how important a call is when its server must shed load. Four
// levels; the zero value means "not said" and counts as normal. The server
// side (runtime/server) uses the same type.
type Priority uint8

// The priorities, lowest first.
const (
	PriorityUnspecified Priority = Priority(priority.Unspecified)
	PriorityLow         Priority = Priority(priority.Low)
	PriorityNormal      Priority = Priority(priority.Normal)
	PriorityHigh        Priority = Priority(priority.High)
	PriorityCritical    Priority = Priority(priority.Critical)
)

// String returns the name sent in PriorityHeader: "low", "normal", …
func (p Priority) String() string {
	if name, ok := priority.Name(uint8(p)); ok {
		return name
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// checkPriority refuses, at field, a priority none of the constants
// names; both sides' validators ask it.
func checkPriority(p Priority, field string, r *reporter) {
	if p > PriorityCritical {
		r.bad(field, "unknown priority %d: use PriorityLow, PriorityNormal, PriorityHigh or PriorityCritical (or PriorityUnspecified for none)", uint8(p))
	}
}
