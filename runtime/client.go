package runtime

import (
	"context"

	"google.golang.org/grpc"
)

// Client holds the state a generated client shares between its methods:
// the circuit breakers, the bulkheads and the retry budget of one
// dependency. It is safe for concurrent use.
type Client struct {
	policy  *ServicePolicy
	methods []*Method
}

// Method is the compiled, ready-to-run policy of one method of a Client.
type Method struct {
	client *Client
	policy *MethodPolicy
}

// NewClient builds the shared state for the service described by p. It
// checks the policy and refuses one that cannot be applied.
func NewClient(p *ServicePolicy, opts ...Option) (*Client, error) {
	panic("TODO")
}

// Method returns the method at index i of the policy's Methods.
func (c *Client) Method(i int) *Method { return c.methods[i] }

// Conn wraps cc so that streams opened through it get the timeout, breaker
// and bulkhead of their method. Unary calls pass through unchanged: generated
// code applies their policy with Unary.
func (c *Client) Conn(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
	panic("TODO")
}

// Unary runs one unary call under the method's policy.
func Unary[Req, Resp any](ctx context.Context, m *Method, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	panic("TODO")
}

// Option configures a Client.
type Option func(*options)

type options struct{}
