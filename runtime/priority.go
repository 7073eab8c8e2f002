package runtime

import (
	"context"
	"fmt"

	"google.golang.org/grpc/metadata"

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

// PriorityHeader is the metadata key that carries a call's priority
// ("low", "normal", "high" or "critical"). The server takes the lowest of
// the values sent and of the method's annotated priority: a caller may
// lower a call's priority, never raise it. A value it does not know is
// ignored.
const PriorityHeader = priority.Header

// String returns the name sent in PriorityHeader: "low", "normal", …
func (p Priority) String() string {
	if name, ok := priority.Name(uint8(p)); ok {
		return name
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// WithPriority returns ctx with the priority p sent to the services called
// with it (PriorityUnspecified, or a number that is no priority, sends
// normal). It can only lower what they grant: each server applies the
// lowest of the values sent and of its method's annotation.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return metadata.AppendToOutgoingContext(ctx, PriorityHeader, Priority(priority.OrNormal(uint8(p))).String())
}

// prioritize returns ctx carrying the method's annotated priority
// (MethodPolicy.Priority) for the call, so that the server can shed the
// least important work first. It never raises a priority: when ctx already
// sends one as low or lower (the caller lowered it with WithPriority), ctx
// is returned as it is; a method without a priority, or a normal one the
// caller did not lower, sends none (the server takes no header as
// normal). Every handle calls it on every call.
func prioritize(ctx context.Context, m *methodState) context.Context {
	if m == nil || ctx == nil {
		return ctx // the handles refuse a nil context, naming the method
	}
	p := m.policy.Priority
	if p == PriorityUnspecified || p > PriorityCritical {
		return ctx
	}
	sent, ok := priority.Outgoing(ctx)
	if ok && Priority(sent) <= p {
		return ctx
	}
	if !ok && p == PriorityNormal {
		// A request without the header is normal on the server: the header
		// (and its cost on both sides) is needed only to say otherwise.
		return ctx
	}
	return WithPriority(ctx, p)
}
