package server

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

const (
	getStock     = inventoryv1.InventoryService_GetStock_FullMethodName
	reserveStock = inventoryv1.InventoryService_ReserveStock_FullMethodName
	watchStock   = inventoryv1.InventoryService_WatchStock_FullMethodName
	inventory    = "example.inventory.v1.InventoryService"
)

// inventoryPolicy is what generated code would hold for the example
// inventory service, server side.
func inventoryPolicy() *policy.Server {
	return &policy.Server{
		Name:     inventory,
		Shedding: &policy.Shedding{Limits: policy.Limits{Low: 2, Normal: 4, High: 6, Critical: 8}, Pushback: 250 * time.Millisecond},
		Methods: []policy.ServerMethod{
			{Name: getStock, Priority: PriorityHigh, MinDeadline: 50 * time.Millisecond, DefaultTimeout: 2 * time.Second},
			{Name: reserveStock, Priority: PriorityCritical,
				Dedup:       &policy.Dedup{TTL: time.Minute, Lease: 3 * time.Second},
				NewResponse: func() proto.Message { return new(inventoryv1.ReserveStockResponse) }},
			{Name: watchStock, Kind: policy.KindServerStreaming, Priority: PriorityLow, DefaultTimeout: time.Second},
		},
	}
}

// inventoryServer is an InventoryService whose handlers count their calls
// and run hooks the tests set.
type inventoryServer struct {
	inventoryv1.UnimplementedInventoryServiceServer

	getCalls, reserveCalls, watchCalls atomic.Int64

	mu        sync.Mutex
	onGet     func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error)
	onReserve func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error)
	sawCtx    func(ctx context.Context)
	onWatch   func(ctx context.Context) error
}

func (s *inventoryServer) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	s.getCalls.Add(1)
	s.mu.Lock()
	f, saw := s.onGet, s.sawCtx
	s.mu.Unlock()
	if saw != nil {
		saw(ctx)
	}
	if f != nil {
		return f(ctx, req)
	}
	return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 42}, nil
}

func (s *inventoryServer) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	n := s.reserveCalls.Add(1)
	s.mu.Lock()
	f := s.onReserve
	s.mu.Unlock()
	if f != nil {
		return f(ctx, req)
	}
	return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId() + "-" + itoa(n)}, nil
}

func (s *inventoryServer) WatchStock(req *inventoryv1.WatchStockRequest, st grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]) error {
	s.watchCalls.Add(1)
	s.mu.Lock()
	saw, f := s.sawCtx, s.onWatch
	s.mu.Unlock()
	if saw != nil {
		saw(st.Context())
	}
	if f != nil {
		if err := f(st.Context()); err != nil {
			return err
		}
	}
	return st.Send(&inventoryv1.WatchStockResponse{Sku: req.GetSku(), Units: 1})
}

func itoa(n int64) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// serve starts a gRPC server on loopback with opts and srv registered, and
// stops it when the test ends.
func serve(t testing.TB, srv inventoryv1.InventoryServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	s := grpc.NewServer(opts...)
	inventoryv1.RegisterInventoryServiceServer(s, srv)
	return serveGRPC(t, s)
}

// serveGRPC serves s on loopback until the test ends, and returns its address.
func serveGRPC(t testing.TB, s *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial returns a client connection to addr, closed when the test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// guarded starts srv behind a Guard built from policies and returns the
// Guard and a client.
func guarded(t testing.TB, srv inventoryv1.InventoryServiceServer, policies []*policy.Server, opts ...Option) (*Guard, inventoryv1.InventoryServiceClient, *grpc.ClientConn) {
	t.Helper()
	// A memory store unless the test gives one (the last WithStore wins).
	opts = append([]Option{WithStore(NewMemoryStore(1000))}, opts...)
	g, err := NewGuard(policies, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cc := dial(t, serve(t, srv, g.ServerOptions()...))
	return g, inventoryv1.NewInventoryServiceClient(cc), cc
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or a second passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not true after 2s: %s", what)
}

func stats(t testing.TB, g *Guard) Stats {
	t.Helper()
	s, ok := g.Stats(inventory)
	if !ok {
		t.Fatal("no stats for", inventory)
	}
	return s
}
