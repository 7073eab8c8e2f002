package runtime

import (
	"context"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
)

// What the external tests (package runtime_test) reach below the handles:
// a method by its index, and a call with the idempotency key or cache key
// given per call rather than read by a hook. Compiled into the tests only.

// Method is the compiled policy of one method, as the handles hold it.
type Method = methodState

// Method returns the method at index i of the policy's Methods.
func (c *Client) Method(i int) *Method { return c.methods[i] }

// Policy returns the method's policy.
func (m *methodState) Policy() *policy.Method { return m.policy }

// Unary is UnaryHandle.Call with the idempotency key given, and without the
// priority or the cache.
func Unary[Req, Resp any](ctx context.Context, m *Method, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	if err := refuse(m, ctx, req == nil, nil); err != nil {
		return nil, err
	}
	return callUnary(ctx, m, key, nil, req, opts, call, fallback)
}

// UnaryCached is Unary through the method's cache, key making the cache
// key of a request.
func UnaryCached[Req, Resp any](ctx context.Context, m *Method, idemKey string, key func(*Req) string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	if err := refuse(m, ctx, req == nil, nil); err != nil {
		return nil, err
	}
	return callUnary(ctx, m, idemKey, key, req, opts, call, fallback)
}

// Prioritize is what every handle does to a call's context: it carries the
// method's annotated priority, never raised.
func Prioritize(ctx context.Context, m *Method) context.Context { return prioritize(ctx, m) }

// NewIdempotencyKey is the key a method with GenerateIdempotencyKey sends.
func NewIdempotencyKey() string { return newIdempotencyKey() }
