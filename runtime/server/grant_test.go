package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// reasons lists the ErrorInfo reasons of err in runtime.DoNotRetryDomain.
func reasons(err error) map[string]bool {
	got := map[string]bool{}
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == runtime.DoNotRetryDomain {
			got[ei.GetReason()] = true
		}
	}
	return got
}

// incomingPriority is the priority header a request came with, joined.
func incomingPriority(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return strings.Join(md[PriorityHeader], ",")
}

// TestGrantSecondGuardsDoorIsItsOwn: two Guards on one server, each with
// a policy for GetStock, the first installed whole and the second by its
// interceptor alone, chained inside. The second's MinDeadline is longer:
// a request the first admitted with 150 ms left is refused by the second
// at its own first check, which is its door, so the refusal is marked
// DEADLINE_TOO_SHORT (the caller's time was short, the client's breaker
// counts it as nothing), not taken for time lost in the server because
// the first Guard's grant has the same method name. The handler never
// runs, and each Guard counts what it did.
func TestGrantSecondGuardsDoorIsItsOwn(t *testing.T) {
	srv := &inventoryServer{}
	g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	p2 := inventoryPolicy()
	p2.Methods[0].MinDeadline = 400 * time.Millisecond
	g2, err := NewGuard([]*policy.Server{p2}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	opts := append(g1.ServerOptions(), grpc.ChainUnaryInterceptor(g2.UnaryInterceptor))
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	for i := range 3 {
		_, err := client.GetStock(ctxTimeout(t, 150*time.Millisecond), &inventoryv1.GetStockRequest{})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("request %d: %v, want DEADLINE_EXCEEDED", i, err)
		}
		if r := reasons(err); !r[runtime.DeadlineReason] || !r[DoNotRetryReason] {
			t.Errorf("request %d: reasons %v, want %s and %s: %v", i, r, runtime.DeadlineReason, DoNotRetryReason, err)
		}
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("GetStock ran %d times, want 0", n)
	}
	if s := stats(t, g1); s.DeadlineRefused != 0 || s.Admitted[PriorityHigh] != 3 {
		t.Errorf("first Guard: %d refused, %v admitted; want 0 and 3 high", s.DeadlineRefused, s.Admitted)
	}
	if s := stats(t, g2); s.DeadlineRefused != 3 {
		t.Errorf("second Guard: %d refused as dead, want 3", s.DeadlineRefused)
	}
	eventually(t, "places given back", func() bool { return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0 })
}

// TestGrantOtherGuardsGrantHidesNothing: the tap is the second Guard's,
// and the first Guard's interceptor runs before the second's. The first
// grants the request a priority of its own; the second still finds the
// place its tap took rather than taking another: one request in flight
// in each Guard while the handler runs, each place given back after.
func TestGrantOtherGuardsGrantHidesNothing(t *testing.T) {
	srv := &inventoryServer{}
	g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var in1, in2 atomic.Int64
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		in1.Store(int64(stats(t, g1).InFlight))
		in2.Store(int64(stats(t, g2).InFlight))
		return &inventoryv1.GetStockResponse{}, nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv,
		grpc.InTapHandle(g2.TapHandle), grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
	for i := range 3 {
		if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if a, b := in1.Load(), in2.Load(); a != 1 || b != 1 {
			t.Errorf("request %d: %d in flight in the first Guard and %d in the second while it ran, want 1 and 1", i, a, b)
		}
	}
	eventually(t, "places given back", func() bool { return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0 })
	if s := stats(t, g2); s.Admitted[PriorityHigh] != 3 {
		t.Errorf("second Guard admitted %v, want 3 high", s.Admitted)
	}
}

// TestGrantNotPassedToAnotherMethod: GetStock's handler calls a method of
// the same process that no policy holds, with its own context, through
// the Guard's interceptor (an in-process channel that passes values on).
// PriorityFrom in that method's handler says the Guard granted it
// nothing, rather than reporting GetStock's grant, and a dependency it
// calls through ClientInterceptor is sent no priority of GetStock's.
func TestGrantNotPassedToAnotherMethod(t *testing.T) {
	const other = "/example.other.v1.OtherService/Do"
	srv := &inventoryServer{}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var outer, inner atomic.Value // of Priority, "none" when not granted
	granted := func(ctx context.Context) string {
		if p, ok := PriorityFrom(ctx); ok {
			return p.String()
		}
		return "none"
	}
	var sent atomic.Value // the priority header the dependency saw
	dep := &inventoryServer{sawCtx: func(ctx context.Context) {
		sent.Store(incomingPriority(ctx))
	}}
	depClient := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, dep),
		grpc.WithChainUnaryInterceptor(ClientInterceptor())))
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		outer.Store(granted(ctx))
		_, err := g.UnaryInterceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: other}, func(ctx context.Context, req any) (any, error) {
			inner.Store(granted(ctx))
			return depClient.GetStock(ctx, &inventoryv1.GetStockRequest{})
		})
		if err != nil {
			return nil, err
		}
		return &inventoryv1.GetStockResponse{}, nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, g.ServerOptions()...)))
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := outer.Load(); got != PriorityHigh.String() {
		t.Errorf("GetStock's handler: granted %v, want %v", got, PriorityHigh)
	}
	if got := inner.Load(); got != "none" {
		t.Errorf("the other method's handler: granted %v, want none (GetStock's grant is not its)", got)
	}
	if got := sent.Load(); got != "" {
		t.Errorf("the dependency of the other method was sent priority %q, want none", got)
	}
}

// TestGrantSecondGuardsShedKeepsItsMark: the second Guard of the server,
// installed by its interceptor alone inside the first, sheds GetStock
// beyond one request in flight. Its refusal reaches the caller with the
// SHED mark and the RetryInfo: the first Guard, whose handler the second's
// interceptor is, does not take it for a dependency's refusal passed on.
// The shed request's handler never runs.
func TestGrantSecondGuardsShedKeepsItsMark(t *testing.T) {
	srv := &inventoryServer{}
	g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	p2 := inventoryPolicy()
	p2.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
	g2, err := NewGuard([]*policy.Server{p2}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	release, running := make(chan struct{}), make(chan struct{}, 1)
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		running <- struct{}{}
		<-release
		return &inventoryv1.GetStockResponse{}, nil
	}
	opts := append(g1.ServerOptions(), grpc.ChainUnaryInterceptor(g2.UnaryInterceptor))
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	first := make(chan error, 1)
	go func() {
		_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
		first <- err
	}()
	<-running
	_, err = client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{})
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
		t.Fatalf("second request: %v (reasons %v), want UNAVAILABLE marked %s", err, reasons(err), runtime.ShedReason)
	}
	if d, ok := runtime.Pushback(err, nil); !ok || d != p2.Shedding.Pushback {
		t.Errorf("pushback %v %v, want %v", d, ok, p2.Shedding.Pushback)
	}
	if n := srv.getCalls.Load(); n != 1 {
		t.Errorf("GetStock ran %d times, want 1", n)
	}
	if s := stats(t, g2); s.Shed[PriorityHigh] != 1 || s.Admitted[PriorityHigh] != 1 {
		t.Errorf("second Guard: shed %v admitted %v, want 1 high each", s.Shed, s.Admitted)
	}
}

// TestGrantRefusalPassedOnByMethod: a Guard's refusal returned by a
// handler keeps its marks only where it is the refusal of the handler's
// own method (a Guard inside on the same server refused this request);
// the refusal of another method's request, called in-process, and the
// same status received over the wire have them taken out.
func TestGrantRefusalPassedOnByMethod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	own := checkDeadline(ctx, getStock, time.Second, true)
	if !reasons(own)[runtime.DeadlineReason] {
		t.Fatalf("the door's refusal is not marked: %v", own)
	}
	if got := notRefusedHere(own, getStock); got != own {
		t.Errorf("the refusal of the handler's own method came back as %v", got)
	}
	if r := reasons(notRefusedHere(own, reserveStock)); r[runtime.DeadlineReason] || !r[DoNotRetryReason] {
		t.Errorf("another method's refusal passed on: reasons %v, want the do-not-retry mark alone", r)
	}
	wire := status.ErrorProto(status.Convert(own).Proto())
	if r := reasons(notRefusedHere(wire, getStock)); r[runtime.DeadlineReason] {
		t.Errorf("a refusal received from a dependency passed on with its mark: %v", r)
	}
}

// ctxStream is a grpc.ServerStream of which only the context is used.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// TestGrantNotPassedToAnotherStream: TestGrantNotPassedToAnotherMethod
// for a stream: a stream of a method no policy holds, opened in-process
// with GetStock's context, is granted nothing; GetStock's own handler
// still has its grant after it.
func TestGrantNotPassedToAnotherStream(t *testing.T) {
	const other = "/example.other.v1.OtherService/Watch"
	srv := &inventoryServer{}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var inner, after atomic.Bool // granted in the stream's handler; in GetStock's after it
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		err := g.StreamInterceptor(nil, ctxStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: other, IsServerStream: true},
			func(_ any, ss grpc.ServerStream) error {
				_, ok := PriorityFrom(ss.Context())
				inner.Store(ok)
				return nil
			})
		_, ok := PriorityFrom(ctx)
		after.Store(ok)
		return &inventoryv1.GetStockResponse{}, err
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, g.ServerOptions()...)))
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if inner.Load() {
		t.Error("the other method's stream was granted GetStock's priority")
	}
	if !after.Load() {
		t.Error("GetStock's handler lost its own grant")
	}
}
