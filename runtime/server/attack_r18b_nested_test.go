package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// nestingServer's GetStock calls ReserveStock of the same process through
// the Guard's interceptor, with its own context: what an in-process
// channel that passes the context's values on (grpchan's inprocgrpc,
// with the Guard's interceptors installed on it) does.
type nestingServer struct {
	*inventoryServer
	g      *Guard
	method string // called nested: reserveStock, or one of a service without shedding
}

func (n *nestingServer) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (resp *inventoryv1.GetStockResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "the nested call panicked: %v", r)
		}
	}()
	info := &grpc.UnaryServerInfo{FullMethod: n.method}
	inner := func(ctx context.Context, req any) (any, error) {
		return n.inventoryServer.ReserveStock(ctx, req.(*inventoryv1.ReserveStockRequest))
	}
	r, err := n.g.UnaryInterceptor(ctx, &inventoryv1.ReserveStockRequest{OrderId: "nested"}, info, inner)
	if err != nil {
		return nil, err
	}
	return &inventoryv1.GetStockResponse{Sku: r.(*inventoryv1.ReserveStockResponse).GetReservationId()}, nil
}

// TestAttackR18bNestedRequestServedOnItsOwn: a request to another method
// made with a served request's context is, as the Guard's doc says,
// served on its own: it runs (no panic, no refusal for a stream that has
// not ended), takes a place of its own while it runs when its service
// sheds (the same service here: 2 in flight), none when it does not
// (another service: 1, the outer's), and every place comes back.
func TestAttackR18bNestedRequestServedOnItsOwn(t *testing.T) {
	const other = "/example.other.v1.OtherService/Do"
	for _, c := range []struct {
		method   string
		inFlight int64
	}{{reserveStock, 2}, {other, 1}} {
		t.Run(c.method, func(t *testing.T) {
			srv := &inventoryServer{}
			var inFlight atomic.Int64
			otherPolicy := &policy.Server{Name: "example.other.v1.OtherService", Methods: []policy.ServerMethod{{Name: other}}}
			g, err := NewGuard([]*policy.Server{inventoryPolicy(), otherPolicy}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				inFlight.Store(int64(stats(t, g).InFlight))
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
			}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, &nestingServer{srv, g, c.method}, g.ServerOptions()...)))
			for i := range 3 {
				resp, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{})
				if err != nil {
					t.Fatalf("request %d: %v", i, fmt.Sprint(err))
				}
				if resp.GetSku() != "r-nested" {
					t.Errorf("request %d: %v", i, resp)
				}
				if n := inFlight.Load(); n != c.inFlight {
					t.Errorf("request %d: %d in flight while the nested request ran, want %d", i, n, c.inFlight)
				}
			}
			eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
			if s := stats(t, g); s.Admitted[PriorityHigh]+s.Admitted[PriorityCritical] != 3+3*uint64(c.inFlight-1) {
				t.Errorf("admitted %v", s.Admitted)
			}
		})
	}
}
