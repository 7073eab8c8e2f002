package runtime

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

// PriorityHeader is the metadata key that carries a call's priority
// ("low", "normal", "high" or "critical"). The server takes the lowest of
// the values sent and of the method's annotated priority: a caller may
// lower a call's priority, never raise it. A value it does not know is
// ignored.
const PriorityHeader = priority.Header

// WithPriority returns ctx with the priority p sent to the services called
// with it (policy.PriorityUnspecified, or a number that is no priority, sends
// normal). It can only lower what they grant: each server applies the
// lowest of the values sent and of its method's annotation.
func WithPriority(ctx context.Context, p policy.Priority) context.Context {
	return metadata.AppendToOutgoingContext(ctx, PriorityHeader, policy.Priority(priority.OrNormal(uint8(p))).String())
}

// prioritize returns ctx carrying the method's annotated priority
// (policy.Method.Priority) for the call, so that the server can shed the
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
	if p == policy.PriorityUnspecified || p > policy.PriorityCritical {
		return ctx
	}
	sent, ok := priority.Outgoing(ctx)
	if ok && policy.Priority(sent) <= p {
		return ctx
	}
	if !ok && p == policy.PriorityNormal {
		// A request without the header is normal on the server: the header
		// (and its cost on both sides) is needed only to say otherwise.
		return ctx
	}
	return WithPriority(ctx, p)
}
