package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// floodServer's WatchStock sends until Send fails, as a handler that
// honours its stream's errors does (it does not poll its context between
// messages: Send returning is what it relies on).
type floodServer struct {
	inventoryv1.UnimplementedInventoryServiceServer
	returned chan error
}

func (s *floodServer) WatchStock(req *inventoryv1.WatchStockRequest, st grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]) error {
	msg := &inventoryv1.WatchStockResponse{Sku: strings.Repeat("s", 1024), Units: 1}
	for {
		if err := st.Send(msg); err != nil {
			s.returned <- err
			return err
		}
	}
}

// TestAttackR18DefaultTimeoutReachesTheStream: a caller opens WatchStock
// without a deadline and then reads nothing (a stuck consumer, or one
// that means harm). The handler's Send blocks on flow control once the
// stream's window is full. The method's DefaultTimeout (200 ms here) must
// bound the request, as the README says of a request that came without a
// deadline: the handler's blocked Send must return, the handler end, and
// its place in flight be given back. A default timeout only on the
// handler's context, which gRPC's Send does not wait on, leaves the
// handler blocked, and the place taken, for as long as the connection
// lives.
func TestAttackR18DefaultTimeoutReachesTheStream(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[2].DefaultTimeout = 200 * time.Millisecond // WatchStock
	srv := &floodServer{returned: make(chan error, 1)}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	// No BDP estimation: the windows stay at 64 KiB, so the flood fills them.
	cc := dial(t, serve(t, srv, g.ServerOptions()...), grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := inventoryv1.NewInventoryServiceClient(cc).WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.returned:
		if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Canceled {
			t.Errorf("the blocked Send returned %v, want the end of the default timeout", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the handler is still blocked in Send 2s after its 200ms default timeout; %d in flight", stats(t, g).InFlight)
	}
	eventually(t, "the place in flight given back", func() bool { return stats(t, g).InFlight == 0 })
}

// TestAttackR18DefaultTimeoutEndsAWaitingRecv: a client-streaming method,
// opened without a deadline by a caller that then sends nothing and never
// closes its side. The handler waits in RecvMsg, which waits on gRPC's
// stream, not on the handler's context; the DefaultTimeout must end that
// wait too, and give the place in flight back.
func TestAttackR18DefaultTimeoutEndsAWaitingRecv(t *testing.T) {
	const upload = "/example.inventory.v1.InventoryService/Upload"
	p := &policy.Server{
		Name:     inventory,
		Shedding: &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}},
		Methods:  []policy.ServerMethod{{Name: upload, Kind: policy.KindClientStreaming, DefaultTimeout: 200 * time.Millisecond}},
	}
	g, err := NewGuard([]*policy.Server{p})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	s := grpc.NewServer(g.ServerOptions()...)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: inventory,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Upload", ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			err := ss.RecvMsg(new(inventoryv1.GetStockRequest))
			returned <- err
			return err
		}}},
	}, struct{}{})
	cc := dial(t, serveGRPC(t, s))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, upload); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-returned:
		if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Canceled {
			t.Errorf("the waiting Recv returned %v, want the end of the default timeout", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the handler still waits in RecvMsg 2s after its 200ms default timeout; %d in flight", stats(t, g).InFlight)
	}
	eventually(t, "the place in flight given back", func() bool { return stats(t, g).InFlight == 0 })
}
