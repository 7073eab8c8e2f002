package example_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/tcpproxy"
)

// TestAttackR18eChargeNeverRepeatedAcrossFaults: Charge (no key, not
// idempotent) through a proxy that loses the reply after the server
// charged, then resets the connection while a charge runs. The generated
// client makes one attempt each time: the server charges once per call,
// and the caller gets UNAVAILABLE (the outcome unknown to it), never a
// second charge.
func TestAttackR18eChargeNeverRepeatedAcrossFaults(t *testing.T) {
	var p *tcpproxy.Proxy
	cutNow := make(chan struct{})
	b := func(ctx context.Context, c server.Call) error {
		switch {
		case c.Method != paymentsv1.PaymentsService_Charge_FullMethodName:
		case c.N == 1:
			p.LoseNextReply() // the server's next bytes are this reply
		case c.N == 2:
			close(cutNow)
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	srv, err := server.Start("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	p = tcpproxy.Start(t, srv.Addr())
	cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pay.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: "o1", AmountCents: 100}); status.Code(err) != codes.Unavailable {
		t.Errorf("Charge whose reply was lost: %v, want UNAVAILABLE", err)
	}
	if n := srv.Calls(paymentsv1.PaymentsService_Charge_FullMethodName); n != 1 || p.Lost() != 1 {
		t.Errorf("the server charged %d times (replies lost %d), want 1", n, p.Lost())
	}
	go func() {
		<-cutNow
		p.Cut()
		p.Restore()
	}()
	if _, err := pay.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: "o2", AmountCents: 100}); status.Code(err) != codes.Unavailable {
		t.Errorf("Charge cut while it ran: %v, want UNAVAILABLE", err)
	}
	if n := srv.Calls(paymentsv1.PaymentsService_Charge_FullMethodName); n != 2 {
		t.Errorf("the server charged %d times for two calls, want 2", n)
	}
}
