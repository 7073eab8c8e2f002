package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18bShedPushbackHonouredByTheRuntime: the shedding refusal's
// pushback (250ms, in a RetryInfo detail, the tap cannot send the
// trailer) reaches the client runtime's retry loop, which waits it out
// instead of its own 1ms backoff: the caller is refused once, not three
// times in as many milliseconds, and its retry, after the pushback, finds
// the place the held request gave back 100ms in.
func TestAttackR18bShedPushbackHonouredByTheRuntime(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		if req.GetSku() == "held" {
			<-release
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
	p := inventoryPolicy()
	p.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
	g, plain, _ := guarded(t, srv, []*policy.Server{p})
	held := make(chan error, 1)
	go func() {
		_, err := plain.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "held"})
		held <- err
	}()
	eventually(t, "the held request admitted", func() bool { return stats(t, g).InFlight == 1 })
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	client := newRuntimeClient(t, plain) // 3 attempts, 1ms backoff, UNAVAILABLE retried
	start := time.Now()
	resp, err := client.GetStock(ctxTimeout(t, 2*time.Second), &inventoryv1.GetStockRequest{Sku: "retried"})
	el := time.Since(start)
	if err != nil {
		t.Fatalf("retried after the pushback: %v, want served (refused %v times)", err, stats(t, g).Shed)
	}
	if resp.GetSku() != "retried" {
		t.Errorf("answer %v", resp)
	}
	if el < 250*time.Millisecond {
		t.Errorf("served after %s, sooner than the 250ms pushback", el)
	}
	if s := stats(t, g); s.Shed[PriorityHigh] != 1 {
		t.Errorf("refused %d times, want once: the retry waits for the pushback", s.Shed[PriorityHigh])
	}
	if err := <-held; err != nil {
		t.Error(err)
	}
}

// TestAttackR18bRefusedBeforeDecoding: the README's "in the tap, before
// decoding", observed: while the service is full, a request whose message
// does not decode (invalid UTF-8 in a string field) is answered with the
// shedding refusal, not with the decoding error, and a dead one with
// DEADLINE_EXCEEDED; the message was never read. With the interceptors
// alone, the same request is decoded first and fails as INTERNAL.
func TestAttackR18bRefusedBeforeDecoding(t *testing.T) {
	bad := wrapperspb.Bytes([]byte{0xff, 0xfe}) // field 1 of GetStockRequest is a string
	for _, tapped := range []bool{true, false} {
		srv := &inventoryServer{}
		release := make(chan struct{})
		srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
			<-release
			return &inventoryv1.GetStockResponse{}, nil
		}
		p := inventoryPolicy()
		p.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
		g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		opts := g.ServerOptions()
		if !tapped {
			opts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.UnaryInterceptor)}
		}
		cc := dial(t, serve(t, srv, opts...))
		held := make(chan error, 1)
		go func() {
			_, err := inventoryv1.NewInventoryServiceClient(cc).GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
			held <- err
		}()
		eventually(t, "the held request admitted", func() bool { return stats(t, g).InFlight == 1 })
		err = cc.Invoke(ctxTimeout(t, time.Second), getStock, bad, new(inventoryv1.GetStockResponse))
		_, hasPushback := runtime.Pushback(err, nil)
		switch {
		case tapped && (status.Code(err) != codes.Unavailable || !hasPushback):
			t.Errorf("with the tap, an undecodable request while full: %v, want the shedding refusal", err)
		case !tapped && status.Code(err) != codes.Internal:
			t.Errorf("interceptors alone, an undecodable request while full: %v, want INTERNAL from decoding", err)
		}
		if tapped {
			_, code, _ := rawCall(t, cc.Target(), getStock, bad, time.Second, http.Header{"Grpc-Timeout": {"1n"}})
			if code != codes.DeadlineExceeded {
				t.Errorf("with the tap, a dead undecodable request: %s, want DEADLINE_EXCEEDED", code)
			}
		}
		close(release)
		if err := <-held; err != nil {
			t.Error(err)
		}
		eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	}
}
