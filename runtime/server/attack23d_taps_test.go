package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// tapsOf is one InTapHandle calling the TapHandles of gs in order, each
// while the ones before admitted the request.
func tapsOf(gs ...*Guard) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		for _, g := range gs {
			var err error
			if ctx, err = g.TapHandle(ctx, info); err != nil {
				return ctx, err
			}
		}
		return ctx, nil
	}
}

func inFlight(t *testing.T, gs []*Guard) []int {
	t.Helper()
	n := make([]int, len(gs))
	for i, g := range gs {
		n[i] = stats(t, g).InFlight
	}
	return n
}

// TestAttack23dThreeChainedTapsUnaryRefusals: three Guards, each shedding
// the service, their taps chained in every order in one InTapHandle and
// their interceptors chained g0, g1, g2. One of them (first, middle or
// last of the taps) needs more time for GetStock than the caller gives
// (MinDeadline): each refusal at its tap gives back the places the taps
// called before it took (the Guard called first through to the one that
// refuses, whichever of the three is the interceptors' outer), so that
// after more refusals than any limit no Guard holds a place and a request
// with time enough runs through all three.
func TestAttack23dThreeChainedTapsUnaryRefusals(t *testing.T) {
	orders := [][3]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}}
	for _, order := range orders {
		for refuser := range 3 {
			t.Run(fmt.Sprintf("taps %v, %d refuses", order, refuser), func(t *testing.T) {
				gs := make([]*Guard, 3)
				for i := range gs {
					p := inventoryPolicy()
					p.Shedding.Limits = policy.Limits{Low: 2, Normal: 2, High: 2, Critical: 2}
					if i == refuser {
						p.Methods[0].MinDeadline, p.Methods[0].DefaultTimeout = 3*time.Second, 3*time.Second
					}
					g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
					if err != nil {
						t.Fatal(err)
					}
					gs[i] = g
				}
				srv := &inventoryServer{}
				client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv,
					grpc.InTapHandle(tapsOf(gs[order[0]], gs[order[1]], gs[order[2]])),
					grpc.ChainUnaryInterceptor(gs[0].UnaryInterceptor, gs[1].UnaryInterceptor, gs[2].UnaryInterceptor))))
				for i := range 5 {
					_, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
					if status.Code(err) != codes.DeadlineExceeded {
						t.Fatalf("request %d with 1s left: %v; want the refuser's DEADLINE_EXCEEDED", i, err)
					}
					if n := inFlight(t, gs); n[0]+n[1]+n[2] != 0 {
						t.Fatalf("after refusal %d the Guards hold %v places; want none", i, n)
					}
				}
				if _, err := client.GetStock(ctxTimeout(t, 10*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
					t.Fatalf("a request with time enough: %v; want the handler's answer", err)
				}
				if n := srv.getCalls.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want 1", n)
				}
				for i, g := range gs {
					s := stats(t, g)
					wantRefused, wantAdmitted := uint64(0), uint64(6)
					pos := 0
					for j, k := range order {
						if k == i {
							pos = j
						}
					}
					refPos := 0
					for j, k := range order {
						if k == refuser {
							refPos = j
						}
					}
					switch {
					case i == refuser:
						wantRefused, wantAdmitted = 5, 1
					case pos > refPos:
						wantAdmitted = 1 // never reached by the refused ones
					}
					if s.DeadlineRefused != wantRefused || s.Admitted[PriorityHigh] != wantAdmitted || s.InFlight != 0 {
						t.Errorf("Guard %d: %d refused, %d admitted, %d in flight; want %d, %d, 0", i, s.DeadlineRefused, s.Admitted[PriorityHigh], s.InFlight, wantRefused, wantAdmitted)
					}
				}
			})
		}
	}
}

// TestAttack23dThreeChainedTapsStreams: streams (WatchStock, low
// priority) through three Guards whose taps are chained in reverse of
// their interceptors, the last tap's Guard holding one low place. A held
// stream takes a place in each; every further stream is shed at the last
// tap and leaves the other two with only the held stream's; when the held
// stream's connection closes mid-way (not the stream cancelled: the
// client's connection), every Guard is back to no place, and a stream
// after that is admitted by all three.
func TestAttack23dThreeChainedTapsStreams(t *testing.T) {
	gs := make([]*Guard, 3)
	for i := range gs {
		p := inventoryPolicy()
		p.Methods[2].DefaultTimeout = 10 * time.Second
		p.Shedding.Limits = policy.Limits{Low: 3, Normal: 3, High: 3, Critical: 3}
		if i == 0 {
			p.Shedding.Limits.Low = 1 // the last tap called
		}
		g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	srv := &inventoryServer{}
	started := make(chan struct{}, 4)
	srv.onWatch = func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	addr := serve(t, srv, grpc.InTapHandle(tapsOf(gs[2], gs[1], gs[0])),
		grpc.ChainStreamInterceptor(gs[0].StreamInterceptor, gs[1].StreamInterceptor, gs[2].StreamInterceptor))
	heldConn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer heldConn.Close()
	held, err := inventoryv1.NewInventoryServiceClient(heldConn).WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "held"})
	if err != nil {
		t.Fatal(err)
	}
	heldEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := held.Recv(); err != nil {
				heldEnded <- err
				return
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the held stream's handler did not start")
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, addr))
	for i := range 5 {
		st, err := client.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "b"})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("stream %d: %v; want shed UNAVAILABLE by the last tap", i, err)
		}
		if n := inFlight(t, gs); n[0] != 1 || n[1] != 1 || n[2] != 1 {
			t.Fatalf("after shed stream %d the Guards hold %v places; want the held stream's only, [1 1 1]", i, n)
		}
	}
	if err := heldConn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-heldEnded; status.Code(err) != codes.Canceled {
		t.Errorf("the held stream ended %v; want CANCELLED (its connection closed)", err)
	}
	eventually(t, "every Guard gave the held stream's place back", func() bool {
		n := inFlight(t, gs)
		return n[0]+n[1]+n[2] == 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "after"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("a stream after the held one ended was not served")
	}
	cancel()
	_, _ = st.Recv()
	if n := srv.watchCalls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2 (held, after)", n)
	}
	eventually(t, "no Guard holds a place at the end", func() bool {
		n := inFlight(t, gs)
		return n[0]+n[1]+n[2] == 0
	})
	if s := stats(t, gs[0]); s.Shed[PriorityLow] != 5 {
		t.Errorf("the last tap's Guard shed %d; want 5", s.Shed[PriorityLow])
	}
	for i, g := range gs {
		want := uint64(7)
		if i == 0 {
			want = 2
		}
		if s := stats(t, g); s.Admitted[PriorityLow] != want {
			t.Errorf("Guard %d admitted %d low; want %d", i, s.Admitted[PriorityLow], want)
		}
	}
}
