package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc/metadata"
)

// Priority is how important a request is when the server must shed load.
// Four levels; the zero value means "not said" and counts as normal.
type Priority uint8

// The priorities, lowest first.
const (
	PriorityUnspecified Priority = iota
	PriorityLow
	PriorityNormal
	PriorityHigh
	PriorityCritical
)

// PriorityHeader is the metadata key that carries a request's priority
// ("low", "normal", "high" or "critical"). The server takes the lowest of
// the values sent and of the method's annotated priority: a caller may
// lower a request's priority, never raise it. A value it does not know is
// ignored.
const PriorityHeader = "resilient-priority"

var priorityNames = [...]string{"unspecified", "low", "normal", "high", "critical"}

// String returns the name sent in PriorityHeader: "low", "normal", …
func (p Priority) String() string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// ParsePriority returns the priority named s ("low", "normal", "high",
// "critical").
func ParsePriority(s string) (Priority, bool) {
	for p := PriorityLow; p <= PriorityCritical; p++ {
		if priorityNames[p] == s {
			return p, true
		}
	}
	return PriorityUnspecified, false
}

func (p Priority) orNormal() Priority {
	if p == PriorityUnspecified || p > PriorityCritical {
		return PriorityNormal
	}
	return p
}

// OutgoingPriority returns ctx with the priority p sent to the services
// called with it. It can only lower what they would grant: each applies the
// lowest of p and its method's annotation.
func OutgoingPriority(ctx context.Context, p Priority) context.Context {
	return metadata.AppendToOutgoingContext(ctx, PriorityHeader, p.orNormal().String())
}

// effectivePriority is the lowest of the annotated priority and every
// known value of PriorityHeader in md.
func effectivePriority(md metadata.MD, annotated Priority) Priority {
	p := annotated.orNormal()
	for _, v := range md[PriorityHeader] {
		if q, ok := ParsePriority(v); ok && q < p {
			p = q
		}
	}
	return p
}

type priorityKey struct{}

// PriorityFrom returns the priority the Guard granted the request being
// served with ctx, and false outside a request of a method in a policy.
// ClientInterceptor forwards it to the services the handler calls.
func PriorityFrom(ctx context.Context) (Priority, bool) {
	p, ok := ctx.Value(priorityKey{}).(Priority)
	return p, ok
}
