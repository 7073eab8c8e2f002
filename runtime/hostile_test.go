package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Hostile inputs to the API: what a careless or unlucky caller passes.
// Each gets a clear error, never a panic, and nothing reaches the server
// that the caller did not mean to send.

func TestHostileUnaryInputs(t *testing.T) {
	srv, cc := startFault(t, server.Healthy)
	c := invClient(t, cc, nil, nil) // the zero-value options: valid
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	cases := []struct {
		name string
		ctx  context.Context
		req  *inventoryv1.GetStockRequest
		want codes.Code
	}{
		{"nil request", context.Background(), nil, codes.InvalidArgument},
		{"nil context", nil, &inventoryv1.GetStockRequest{Sku: "a"}, codes.InvalidArgument},
		{"cancelled context", cancelled, &inventoryv1.GetStockRequest{Sku: "a"}, codes.Canceled},
		{"expired deadline", expired, &inventoryv1.GetStockRequest{Sku: "a"}, codes.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Calls(getStock)
			_, err := c.GetStock(tc.ctx, tc.req) //nolint:staticcheck // a nil context is one of the cases
			if status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if got := srv.Calls(getStock) - before; got != 0 {
				t.Errorf("%d calls reached the server", got)
			}
		})
	}
	// None of them counted against the breaker, took a permit, or spent the budget.
	if s, _ := c.Runtime().BreakerState(getStock); s != runtime.StateClosed {
		t.Errorf("breaker %v after hostile inputs, want closed", s)
	}
	if n, _ := c.Runtime().BulkheadInUse(getStock); n != 0 {
		t.Errorf("%d permits taken after hostile inputs", n)
	}
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Errorf("a good call after them: %v", err)
	}
}

func TestHostileStreamInputs(t *testing.T) {
	srv, cc := startFault(t, server.Healthy)
	c := invClient(t, cc, nil, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	//nolint:staticcheck // a nil context is the point
	if _, err := c.WatchStock(nil, &inventoryv1.WatchStockRequest{Sku: "a"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil context: %v, want INVALID_ARGUMENT", err)
	}
	st, err := c.WatchStock(cancelled, &inventoryv1.WatchStockRequest{Sku: "a"})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Canceled {
		t.Errorf("cancelled context: %v, want CANCELED", err)
	}
	if got := srv.Calls(watchStock); got != 0 {
		t.Errorf("%d streams reached the server", got)
	}
	eventually(t, "permit freed", func() bool { n, _ := c.Runtime().BulkheadInUse(watchStock); return n == 0 })
}

// TestHostileNilStreamRequest: a nil request to a server-streaming method
// is refused before anything is sent, as for unary methods.
func TestHostileNilStreamRequest(t *testing.T) {
	srv, cc := startFault(t, server.Healthy)
	c := invClient(t, cc, nil, nil)
	st, err := c.WatchStock(context.Background(), nil)
	if st != nil || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("WatchStock(ctx, nil) = %v, %v; want INVALID_ARGUMENT", st, err)
	}
	if got := srv.Calls(watchStock); got != 0 {
		t.Errorf("the server saw %d streams, want none", got)
	}
}

func TestHostileConstructorInputs(t *testing.T) {
	_, cc := startFault(t, server.Healthy)
	_, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(newFakeClock()), nil},
	})
	if err == nil || !strings.Contains(err.Error(), "option 1 is nil") {
		t.Errorf("a nil runtime.Option: %v, want an error naming it", err)
	}
	if _, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(nil)},
	}); err == nil {
		t.Error("WithPolicy(nil) accepted")
	}
	if _, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) { p.Methods = append(p.Methods, p.Methods[0]) })},
	}); err == nil {
		t.Error("a policy naming a method twice accepted")
	}
	// A zero-value Client is not usable; a nil *methodState is refused.
	if _, err := runtime.Unary(context.Background(), nil, "", &inventoryv1.GetStockRequest{}, nil,
		inventoryv1.NewInventoryServiceClient(cc).GetStock, nil); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("nil method: %v, want FAILED_PRECONDITION", err)
	}
	c := invClient(t, cc, nil, nil)
	var rerr *runtime.Error
	if _, err := c.GetStock(context.Background(), nil); !errors.As(err, &rerr) {
		t.Errorf("nil request: %v, want a *runtime.Error", err)
	}
}

// TestHostileNilConnection: the constructor refuses a nil connection with
// an error that says what to pass instead.
func TestHostileNilConnection(t *testing.T) {
	c, err := inventoryv1.NewInventoryServiceResilientClient(nil, inventoryv1.InventoryServiceResilientOptions{})
	if c != nil || status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "grpc.NewClient") {
		t.Fatalf("NewInventoryServiceResilientClient(nil) = %v, %v; want INVALID_ARGUMENT naming the fix", c, err)
	}
}
