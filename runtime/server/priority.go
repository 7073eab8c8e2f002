package server

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Priority is how important a request is when the server must shed load.
// Four levels; the zero value means "not said" and counts as normal. It is
// the client runtime's type, so that the generated clients send exactly
// what the Guard reads; a caller lowers the priority of what it sends with
// runtime.WithPriority.
type Priority = policy.Priority

// The priorities, lowest first.
const (
	PriorityUnspecified = policy.PriorityUnspecified
	PriorityLow         = policy.PriorityLow
	PriorityNormal      = policy.PriorityNormal
	PriorityHigh        = policy.PriorityHigh
	PriorityCritical    = policy.PriorityCritical
)

// PriorityHeader is the metadata key that carries a request's priority
// ("low", "normal", "high" or "critical"). The server takes the lowest of
// the values sent and of the method's annotated priority: a caller may
// lower a request's priority, never raise it. A value it does not know is
// ignored.
const PriorityHeader = runtime.PriorityHeader

// effectivePriority is the lowest of the annotated priority and every
// known value of PriorityHeader in md.
func effectivePriority(md metadata.MD, annotated Priority) Priority {
	return Priority(priority.Lowest(md[PriorityHeader], uint8(annotated)))
}

type priorityKey struct{}

// grant is the priority the Guard granted a request of m.
type grant struct {
	m *method
	p Priority
}

// PriorityFrom returns the priority the Guard granted the request being
// served with ctx, and false outside a request of a method in a policy.
// ClientInterceptor forwards it to the services the handler calls.
func PriorityFrom(ctx context.Context) (Priority, bool) {
	g, ok := ctx.Value(priorityKey{}).(*grant)
	if !ok {
		return PriorityUnspecified, false
	}
	return g.p, true
}
