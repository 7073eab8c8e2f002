// Package server implements the example inventory and payments services
// with faults that can be injected while they run: latency, hanging,
// any status code, per call or per phase. The cascade demonstration and the
// tests run it on loopback; it is also how to see the generated clients
// cope with a misbehaving dependency.
package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// Call describes one call as the server received it.
type Call struct {
	// Method is the full method name, "/pkg.Service/Method".
	Method string
	// N counts the calls to Method, from 1.
	N int
	// IdempotencyKey is the idempotency-key metadata, if sent.
	IdempotencyKey string
}

// Behaviour decides how the server treats one call: it may wait (honouring
// ctx), and returns the status error to answer with, or nil to answer
// normally. It is called on the server's goroutine for the call.
type Behaviour func(ctx context.Context, c Call) error

// Healthy answers every call at once.
func Healthy(context.Context, Call) error { return nil }

// Slow answers after d, or gives up when the caller does.
func Slow(d time.Duration) Behaviour {
	return func(ctx context.Context, _ Call) error { return Wait(ctx, d) }
}

// Hang never answers; it returns only when the caller gives up.
func Hang(ctx context.Context, _ Call) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// Fail answers every call with code.
func Fail(code codes.Code) Behaviour {
	return func(context.Context, Call) error { return status.Error(code, "injected "+code.String()) }
}

// Wait waits for d or until ctx ends; it returns ctx's status error in the
// latter case.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// Server serves the example InventoryService and PaymentsService on a
// loopback port, applying a Behaviour to every call and counting what it
// sees.
type Server struct {
	inventoryv1.UnimplementedInventoryServiceServer
	paymentsv1.UnimplementedPaymentsServiceServer

	behaviour atomic.Pointer[Behaviour]
	grpc      *grpc.Server
	lis       net.Listener
	done      chan struct{}

	mu        sync.Mutex
	calls     map[string]int
	cancelled map[string]int
	keys      map[string][]string
	inFlight  atomic.Int64
	maxFlight atomic.Int64
}

// Start serves on addr ("127.0.0.1:0" for any free port) until Stop. opts
// are given to grpc.NewServer: pass a Guard's ServerOptions (NewGuard) to
// apply the services' annotated server-side policy.
func Start(addr string, b Behaviour, opts ...grpc.ServerOption) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("example server: listen on %s: %w", addr, err)
	}
	return Serve(lis, b, opts...), nil
}

// NewGuard returns the Guard of the example services, built from the
// generated server policy of the inventory service
// (inventoryv1.InventoryServiceServerPolicy): dead requests dropped, load
// shed by priority, ReserveStock deduplicated by order id. The payments
// service has no server-side annotation (its Charge is critical, a priority
// the client sends), so it has no server policy and is not guarded. The
// idempotency entries are kept in memory unless opts give another store
// (rserver.WithStore(redisstore.New(…))); opts also carry the operator's
// overrides (rserver.WithPolicy). Install it with
// Start(addr, b, append(runtime.ServerOptions(), g.ServerOptions()...)...).
func NewGuard(opts ...rserver.Option) (*rserver.Guard, error) {
	return rserver.NewGuard(
		[]*policy.Server{&inventoryv1.InventoryServiceServerPolicy},
		append([]rserver.Option{rserver.WithStore(rserver.NewMemoryStore(100_000))}, opts...)...)
}

// Serve serves on lis until Stop, which closes lis. It is Start for a
// listener made by the caller (one that injects faults into the
// connections, say), with options for the gRPC server.
func Serve(lis net.Listener, b Behaviour, opts ...grpc.ServerOption) *Server {
	s := &Server{
		grpc:      grpc.NewServer(opts...),
		lis:       lis,
		done:      make(chan struct{}),
		calls:     map[string]int{},
		cancelled: map[string]int{},
		keys:      map[string][]string{},
	}
	s.SetBehaviour(b)
	inventoryv1.RegisterInventoryServiceServer(s.grpc, s)
	paymentsv1.RegisterPaymentsServiceServer(s.grpc, s)
	go func() {
		defer close(s.done)
		_ = s.grpc.Serve(lis)
	}()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// SetBehaviour replaces the behaviour for the calls that arrive from now on.
func (s *Server) SetBehaviour(b Behaviour) {
	if b == nil {
		b = Healthy
	}
	s.behaviour.Store(&b)
}

// Stop closes the listener and every connection at once, ending the calls
// in flight, and waits for the server to return.
func (s *Server) Stop() {
	s.grpc.Stop()
	<-s.done
}

// Shutdown stops the server as a process that is exiting should: it
// refuses new calls and lets the calls in flight finish for at most
// grace (a keyed call commits its outcome), then cancels the rest, and
// returns only once every handler has returned. gRPC's GracefulStop waits
// for the handlers even when Stop cuts it short; Stop alone does not (unless
// the server has grpc.WaitForHandlers(true)), and a process exiting
// with a handler still running leaves the Guard's claim on its key pending
// in a shared store, so that every retry of that request waits out the
// lease (3/2 Lease) for a process that is gone.
func (s *Server) Shutdown(grace time.Duration) {
	cut := time.AfterFunc(grace, s.grpc.Stop)
	s.grpc.GracefulStop()
	cut.Stop()
	<-s.done
}

// Calls returns how many calls to method (a full method name) arrived.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Cancelled returns how many calls to method ended because the caller gave
// up (cancelled or ran out of deadline) while the server was still working.
func (s *Server) Cancelled(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[method]
}

// Keys returns the idempotency keys received for method, in order.
func (s *Server) Keys(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[method]...)
}

// MaxInFlight returns the largest number of calls the server was handling
// at once.
func (s *Server) MaxInFlight() int { return int(s.maxFlight.Load()) }

// InFlight returns how many calls the server is handling now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// handle counts a call and applies the behaviour.
func (s *Server) handle(ctx context.Context, method string) error {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxFlight.Load()
		if n <= m || s.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	c := Call{Method: method}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("idempotency-key"); len(v) > 0 {
			c.IdempotencyKey = v[0]
		}
	}
	s.mu.Lock()
	s.calls[method]++
	c.N = s.calls[method]
	if c.IdempotencyKey != "" {
		s.keys[method] = append(s.keys[method], c.IdempotencyKey)
	}
	s.mu.Unlock()
	err := (*s.behaviour.Load())(ctx, c)
	if ctx.Err() != nil {
		s.mu.Lock()
		s.cancelled[method]++
		s.mu.Unlock()
	}
	return err
}

// GetStock answers 42 units of any product.
func (s *Server) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	if err := s.handle(ctx, inventoryv1.InventoryService_GetStock_FullMethodName); err != nil {
		return nil, err
	}
	return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 42}, nil
}

// ReserveStock confirms a reservation named after the order.
func (s *Server) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	if err := s.handle(ctx, inventoryv1.InventoryService_ReserveStock_FullMethodName); err != nil {
		return nil, err
	}
	return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
}

// StockReport answers a report of 120 products and 5040 units.
func (s *Server) StockReport(ctx context.Context, req *inventoryv1.StockReportRequest) (*inventoryv1.StockReportResponse, error) {
	if err := s.handle(ctx, inventoryv1.InventoryService_StockReport_FullMethodName); err != nil {
		return nil, err
	}
	return &inventoryv1.StockReportResponse{Warehouse: req.GetWarehouse(), Products: 120, Units: 5040}, nil
}

// WatchStock sends three updates, then ends the stream.
func (s *Server) WatchStock(req *inventoryv1.WatchStockRequest, st grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]) error {
	if err := s.handle(st.Context(), inventoryv1.InventoryService_WatchStock_FullMethodName); err != nil {
		return err
	}
	for i := range 3 {
		if err := st.Send(&inventoryv1.WatchStockResponse{Sku: req.GetSku(), Units: int64(40 + i)}); err != nil {
			return err
		}
	}
	return nil
}

// Charge confirms a charge named after the order.
func (s *Server) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	if err := s.handle(ctx, paymentsv1.PaymentsService_Charge_FullMethodName); err != nil {
		return nil, err
	}
	return &paymentsv1.ChargeResponse{ChargeId: "c-" + req.GetOrderId()}, nil
}
