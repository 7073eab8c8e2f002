package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// chainedTaps is one InTapHandle for two Guards: the outer's TapHandle,
// then, if it admitted the request, the inner's.
func chainedTaps(outer, inner *Guard) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ctx, err := outer.TapHandle(ctx, info)
		if err != nil {
			return ctx, err
		}
		return inner.TapHandle(ctx, info)
	}
}

// TestAttack23aStreamThroughTwoGuards: a server-streaming method through
// two Guards, both taps chained (the service's own tap calling the
// outer's TapHandle, then the inner's) and both stream interceptors, the
// DefaultTimeouts differing in either order, each Guard shedding the
// service with one low-priority place. A stream sent without a deadline
// whose handler waits on its context ends DEADLINE_EXCEEDED at the
// shorter DefaultTimeout (not the longer); a second stream meanwhile is
// shed by the inner Guard with its mark, passed on by the outer as this
// server's; when both end, neither Guard holds a place.
func TestAttack23aStreamThroughTwoGuards(t *testing.T) {
	const short, long = 300 * time.Millisecond, 3 * time.Second
	pol := func(d time.Duration, limit int) *policy.Server {
		p := inventoryPolicy()
		p.Methods[2].DefaultTimeout = d
		p.Shedding.Limits = policy.Limits{Low: limit, Normal: 10, High: 10, Critical: 10}
		p.Shedding.Pushback = 50 * time.Millisecond
		return p
	}
	for _, order := range [][2]time.Duration{{long, short}, {short, long}} {
		t.Run(order[0].String()+" outside "+order[1].String(), func(t *testing.T) {
			g1, err := NewGuard([]*policy.Server{pol(order[0], 2)}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			g2, err := NewGuard([]*policy.Server{pol(order[1], 1)}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			srv := &inventoryServer{}
			started := make(chan struct{}, 1)
			srv.onWatch = func(ctx context.Context) error {
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
				grpc.ChainStreamInterceptor(g1.StreamInterceptor, g2.StreamInterceptor))))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() {
				for {
					if _, err := st.Recv(); err != nil {
						ended <- err
						return
					}
				}
			}()
			<-started
			// The inner Guard's one low place is taken: a second stream is
			// shed there, its mark passed on by the outer.
			st2, err := client.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "b"})
			if err == nil {
				_, err = st2.Recv()
			}
			if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
				t.Errorf("the second stream: %v (reasons %v); want the inner Guard's UNAVAILABLE marked %s", err, reasons(err), runtime.ShedReason)
			}
			select {
			case err := <-ended:
				took := time.Since(start)
				if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, io.EOF) {
					t.Errorf("the stream without a deadline ended %v; want DEADLINE_EXCEEDED", err)
				}
				if took < short || took >= long {
					t.Errorf("it ended after %s; want the shorter DefaultTimeout, %s, not %s", took, short, long)
				}
			case <-time.After(long):
				t.Fatalf("the stream without a deadline still runs after %s; want it ended at %s", long, short)
			}
			if n := srv.watchCalls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
			eventually(t, "both Guards gave their places back", func() bool {
				return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
			})
			if s1, s2 := stats(t, g1), stats(t, g2); s1.Admitted[PriorityLow] != 2 || s2.Admitted[PriorityLow] != 1 || s2.Shed[PriorityLow] != 1 || s1.DeadlineRefused+s2.DeadlineRefused != 0 {
				t.Errorf("outer admitted %d low, inner admitted %d and shed %d, deadline refusals %d; want 2, 1, 1, 0",
					s1.Admitted[PriorityLow], s2.Admitted[PriorityLow], s2.Shed[PriorityLow], s1.DeadlineRefused+s2.DeadlineRefused)
			}
		})
	}
}

// TestAttack23aChainedTapsInnerRefusalsDoNotFillTheOuter: two Guards'
// taps chained, the inner refusing at its door (its shed, and a deadline
// shorter than its MinDeadline). Each refusal held the place the outer's
// tap had taken until the connection closed (gRPC does not cancel the
// context of a stream its tap refused): after four inner refusals the
// outer, with room for four, shed every request on the connection,
// UNAVAILABLE marked SHED, though nothing ran. The places come back at
// each refusal.
func TestAttack23aChainedTapsInnerRefusalsDoNotFillTheOuter(t *testing.T) {
	outer := inventoryPolicy()
	outer.Shedding.Limits = policy.Limits{Low: 4, Normal: 4, High: 4, Critical: 4}
	inner := inventoryPolicy()
	inner.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
	inner.Methods[0].MinDeadline = time.Second
	g1, err := NewGuard([]*policy.Server{outer}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{inner}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &inventoryServer{}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
	// Deadline refusals by the inner Guard's door.
	for i := range 4 {
		_, err := client.GetStock(ctxTimeout(t, 500*time.Millisecond), &inventoryv1.GetStockRequest{Sku: "a"})
		if status.Code(err) != codes.DeadlineExceeded || !reasons(err)[runtime.DeadlineReason] {
			t.Fatalf("request %d with 500 ms for a MinDeadline of 1 s: %v; want the inner Guard's DEADLINE_EXCEEDED marked %s", i, err, runtime.DeadlineReason)
		}
	}
	// Sheds by the inner Guard: one place there, held by a request.
	release, holding := make(chan struct{}), make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		close(holding)
		<-release
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	held := make(chan error, 1)
	go func() {
		_, err := client.ReserveStock(ctxTimeout(t, 5*time.Second), &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1})
		held <- err
	}()
	select {
	case <-holding:
	case err := <-held:
		t.Fatalf("the request to hold the inner Guard's place: %v; want it to run (the four refusals before left the outer's places taken?)", err)
	}
	for i := range 4 {
		_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
		if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
			t.Fatalf("request %d under the inner Guard's load: %v; want its shed", i, err)
		}
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the request that held the inner place: %v", err)
	}
	for i := range 4 {
		if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
			t.Fatalf("request %d once the load is gone, on the same connection: %v; want the handler's answer", i, err)
		}
	}
	eventually(t, "both Guards hold no place", func() bool {
		return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
	})
	if s1 := stats(t, g1); s1.Shed[PriorityHigh] != 0 {
		t.Errorf("the outer Guard shed %d requests; want none (the inner refused them)", s1.Shed[PriorityHigh])
	}
}
