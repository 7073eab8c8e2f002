package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// runtimeClient calls GetStock through the client runtime's own retry
// loop, as a generated client does.
type runtimeClient struct {
	inventoryv1.InventoryServiceClient
	getStock *runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]
}

func (c runtimeClient) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
	return c.getStock.Call(ctx, req, opts...)
}

// newRuntimeClient gives GetStock 3 attempts and a retry budget too large
// to matter here: the layers' retries alone decide the count.
func newRuntimeClient(t *testing.T, plain inventoryv1.InventoryServiceClient) inventoryv1.InventoryServiceClient {
	t.Helper()
	rt, err := runtime.NewClient(&policy.Service{
		Name:   inventory,
		Budget: &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: &policy.Retry{
			MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1,
			RetryableCodes: policy.CodesOf(codes.Unavailable)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runtime.NewUnary(rt, getStock, plain.GetStock,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		t.Fatal(err)
	}
	return runtimeClient{InventoryServiceClient: plain, getStock: h}
}

// retryInterceptor stands for a naive client that retries UNAVAILABLE up
// to attempts times. With honour, it stops when the server's pushback says
// not to retry (see Pushback), as the client runtime does.
func retryInterceptor(attempts int, honour bool) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var err error
		for range attempts {
			var trailer metadata.MD
			err = invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
			if status.Code(err) != codes.Unavailable {
				return err
			}
			if d, ok := runtime.Pushback(err, trailer); honour && ok && d < 0 {
				return err
			}
		}
		return err
	}
}

// relay is a service whose GetStock calls the next service's GetStock and
// returns what it got, as a handler that passes its dependency's error on.
type relay struct {
	inventoryv1.UnimplementedInventoryServiceServer
	next inventoryv1.InventoryServiceClient
}

func (r *relay) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	return r.next.GetStock(ctx, req)
}

// chainCalls builds user → A → B → C over loopback, C down (UNAVAILABLE to
// everything), each caller making up to 3 attempts, and returns the calls
// that reached C per user request. The callers retry with retryInterceptor,
// or, with useRuntime, with the client runtime's own loop.
func chainCalls(t *testing.T, guard, honour, useRuntime bool) float64 {
	t.Helper()
	policy := func() []*policy.Server {
		return []*policy.Server{{Name: inventory, Methods: []policy.ServerMethod{{Name: getStock}}}}
	}
	serverOpts := func() []grpc.ServerOption {
		if !guard {
			return nil
		}
		g, err := NewGuard(policy())
		if err != nil {
			t.Fatal(err)
		}
		return g.ServerOptions()
	}
	clientTo := func(addr string) inventoryv1.InventoryServiceClient {
		// The retries, and beneath them ClientInterceptor, which sees
		// every attempt's outcome.
		var ics []grpc.UnaryClientInterceptor
		if !useRuntime {
			ics = append(ics, retryInterceptor(3, honour))
		}
		if guard {
			ics = append(ics, ClientInterceptor())
		}
		plain := inventoryv1.NewInventoryServiceClient(dial(t, addr, grpc.WithChainUnaryInterceptor(ics...)))
		if useRuntime {
			return newRuntimeClient(t, plain)
		}
		return plain
	}
	c := &inventoryServer{onGet: func(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		return nil, status.Error(codes.Unavailable, "C is down")
	}}
	cAddr := serve(t, c, serverOpts()...)
	bAddr := serve(t, &relay{next: clientTo(cAddr)}, serverOpts()...)
	aAddr := serve(t, &relay{next: clientTo(bAddr)}, serverOpts()...)
	user := clientTo(aAddr)
	const requests = 10
	for range requests {
		_, err := user.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "x"})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("user request: %v, want UNAVAILABLE", err)
		}
	}
	return float64(c.getCalls.Load()) / requests
}

// TestRetryAtOneLayerOnly measures the chain of the issue: three services,
// each calling the next with 3 attempts, the last one down.
func TestRetryAtOneLayerOnly(t *testing.T) {
	naive := chainCalls(t, false, false, false)
	markedIgnored := chainCalls(t, true, false, false)
	marked := chainCalls(t, true, true, false)
	withRuntime := chainCalls(t, true, true, true)
	t.Logf("calls reaching the last service per user request: naive retries at every layer %.0f; "+
		"do-not-retry marked but ignored by the clients %.0f; marked and honoured %.0f; "+
		"the Guard with the client runtime at every layer %.0f", naive, markedIgnored, marked, withRuntime)
	if naive != 27 {
		t.Errorf("naive: %.1f calls per request, want 3×3×3 = 27", naive)
	}
	if markedIgnored != 27 {
		t.Errorf("marked but ignored: %.1f, want 27", markedIgnored)
	}
	if marked != 3 {
		t.Errorf("marked and honoured: %.1f calls per request, want 3 (only the layer next to C retries)", marked)
	}
	if withRuntime != 3 {
		t.Errorf("the Guard and the client runtime: %.1f calls per request, want 3", withRuntime)
	}
}
