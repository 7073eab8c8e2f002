// Package example_test checks, end to end, that the clients generated from
// the annotated example protos apply what the annotations say, against the
// example server on loopback.
package example_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dial serves the example services with behaviour b on loopback and
// connects to them; both end with the test.
func dial(t *testing.T, b server.Behaviour) (*server.Server, *grpc.ClientConn) {
	t.Helper()
	srv, err := server.Start("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return srv, cc
}

// start is dial with the generated clients, as annotated.
func start(t *testing.T, b server.Behaviour) (*server.Server, *inventoryv1.InventoryServiceResilientClient, *paymentsv1.PaymentsServiceResilientClient) {
	t.Helper()
	srv, cc := dial(t, b)
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, inv, pay
}

func TestGetStockIsRetriedAsAnnotated(t *testing.T) {
	srv, inv, _ := start(t, server.Fail(codes.Unavailable))
	_, err := inv.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
	}
	if got := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); got != 3 {
		t.Errorf("server saw %d GetStock calls, want the annotated max_attempts, 3", got)
	}
}

func TestChargeIsNeverRetried(t *testing.T) {
	srv, _, pay := start(t, server.Fail(codes.Unavailable))
	_, err := pay.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o1", AmountCents: 100})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
	}
	if got := srv.Calls(paymentsv1.PaymentsService_Charge_FullMethodName); got != 1 {
		t.Errorf("server saw %d charges, want exactly 1: Charge is not idempotent", got)
	}
}

func TestReserveStockSendsTheOrderIDOnEveryAttempt(t *testing.T) {
	srv, inv, _ := start(t, server.Fail(codes.Unavailable))
	_, _ = inv.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "order-9", Sku: "apple", Units: 1})
	keys := srv.Keys(inventoryv1.InventoryService_ReserveStock_FullMethodName)
	if len(keys) != 3 {
		t.Fatalf("server saw keys %q, want 3 attempts", keys)
	}
	for _, k := range keys {
		if k != "order-9" {
			t.Fatalf("server saw keys %q, want order-9 every time", keys)
		}
	}
}

func TestHungInventoryTimesOutAtTheAnnotatedTimeout(t *testing.T) {
	// The server notes the time its call had left when it arrived: the
	// timeout the attempt was sent with, whatever the load.
	left := make(chan time.Duration, 1)
	srv, inv, _ := start(t, func(ctx context.Context, c server.Call) error {
		if dl, ok := ctx.Deadline(); ok {
			select {
			case left <- time.Until(dl):
			default:
			}
		}
		return server.Hang(ctx, c)
	})
	// Beside the call, a bare wait for the same 300ms: how late it wakes
	// is what the scheduler alone adds at the moment.
	bare := make(chan time.Duration, 1)
	go func() {
		dl := time.Now().Add(300 * time.Millisecond)
		time.Sleep(time.Until(dl))
		bare <- time.Since(dl)
	}()
	begin := time.Now()
	_, err := inv.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	took := time.Since(begin)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v, want DEADLINE_EXCEEDED", status.Code(err))
	}
	// DEADLINE_EXCEEDED is not a retryable code by default: one attempt of
	// 300 ms, sent with at most 300 ms to run. The caller waits that, give
	// or take the scheduler: twice what it made the bare wait late (the
	// timeout's timer wakes the attempt, which wakes the caller) plus
	// 100ms. A second attempt would show in the server's count.
	late := <-bare
	if took < 300*time.Millisecond || took > 300*time.Millisecond+2*late+100*time.Millisecond {
		t.Errorf("took %v, want the annotated 300ms (a bare wait for it woke %v late)", took, late)
	}
	select {
	case d := <-left:
		if d > 300*time.Millisecond {
			t.Errorf("the attempt reached the server with %v left, want at most the annotated 300ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached the server")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Cancelled(inventoryv1.InventoryService_GetStock_FullMethodName) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the server never saw the call cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); got != 1 {
		t.Errorf("server saw %d GetStock calls, want 1: DEADLINE_EXCEEDED is not retried", got)
	}
}

func TestFallbackAnswersWhenInventoryFails(t *testing.T) {
	_, cc := dial(t, server.Fail(codes.Unavailable))
	var cause error
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			cause = err
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
		// The cause must be the server's UNAVAILABLE, not an attempt
		// timed out by the load on the machine.
		Runtime: []runtime.Option{patient},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := inv.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	if err != nil || resp.GetUnits() != -1 {
		t.Fatalf("resp %v, err %v: want the fallback's answer", resp, err)
	}
	if status.Code(cause) != codes.Unavailable {
		t.Errorf("fallback saw %v, want the final UNAVAILABLE", cause)
	}
}

func TestWatchStockStreamsThroughTheResilientClient(t *testing.T) {
	_, inv, _ := start(t, server.Healthy)
	st, err := inv.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("received %d updates, want 3", n)
	}
}

func TestNilRequestIsRefused(t *testing.T) {
	srv, inv, _ := start(t, server.Healthy)
	if _, err := inv.GetStock(context.Background(), nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := inv.ReserveStock(context.Background(), nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v, want INVALID_ARGUMENT", err)
	}
	if got := srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); got != 0 {
		t.Errorf("a nil request reached the server")
	}
}

func TestOperatorCanEditThePolicyWithoutTouchingTheAnnotatedOne(t *testing.T) {
	_, cc := dial(t, server.Slow(200*time.Millisecond))
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Methods[0].Timeout = 50 * time.Millisecond
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("with a 50ms timeout against a 200ms server: %v, want DEADLINE_EXCEEDED", err)
	}
	if got := inventoryv1.InventoryServiceResilientPolicy.Methods[0].Timeout; got != 300*time.Millisecond {
		t.Errorf("the generated policy changed to %v", got)
	}
	_, err = inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) { p.Bulkhead.Permits = 0 })},
	})
	if err == nil {
		t.Error("an edit leaving zero permits was accepted")
	}
}
