package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redis/go-redis/v9"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// scripted is a ReserveStock whose every order runs a script of its own,
// given the order's run number (1 for its first run), counting the runs
// per order as the server sees them.
type scripted struct {
	inventoryv1.UnimplementedInventoryServiceServer
	mu     sync.Mutex
	runs   map[string]int
	script func(ctx context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error)
}

func newScripted(script func(ctx context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error)) *scripted {
	return &scripted{runs: map[string]int{}, script: script}
}

func (s *scripted) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	s.mu.Lock()
	s.runs[req.GetOrderId()]++
	n := s.runs[req.GetOrderId()]
	s.mu.Unlock()
	return s.script(ctx, req.GetOrderId(), n)
}

func (s *scripted) count(order string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[order]
}

// answered is what a caller received: the response's id or the status,
// and whether the trailer said it was replayed.
type answered struct {
	id       string
	code     codes.Code
	msg      string
	replayed bool
}

func (a answered) String() string {
	if a.code == codes.OK {
		return fmt.Sprintf("answer %q (replayed %v)", a.id, a.replayed)
	}
	return fmt.Sprintf("%s %q (replayed %v)", a.code, a.msg, a.replayed)
}

// call sends ReserveStock for order with key order, from ctx.
func call(ctx context.Context, c inventoryv1.InventoryServiceClient, order string) answered {
	ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, order)
	var tr metadata.MD
	resp, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "a", Units: 1}, grpc.Trailer(&tr))
	st := status.Convert(err)
	return answered{id: resp.GetReservationId(), code: st.Code(), msg: st.Message(), replayed: len(tr.Get(server.ReplayedHeader)) == 1}
}

func callWithin(c inventoryv1.InventoryServiceClient, order string, d time.Duration) answered {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return call(ctx, c, order)
}

// TestAttack25dEveryCodeKeptOrForgottenOnRedis: "the final status
// (FAILED_PRECONDITION, NOT_FOUND, … the answers) with its code, message
// and details" is kept, a transient failure "is not kept: the key is freed
// so a repeat runs again", and a handler's own UNAUTHENTICATED is not kept
// whatever FinalCodes hold. Every gRPC code a handler can return, on a real
// Redis, the request otherwise ordinary (no dependency call, its caller
// still waiting): a kept one is replayed to the repeat with its code and
// message, the handler not run, and Redis holds the done entry; a
// forgotten one leaves no entry and the repeat runs the handler.
func TestAttack25dEveryCodeKeptOrForgottenOnRedis(t *testing.T) {
	r := startRedis(t)
	admin := client(t, r.addr)
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		var c codes.Code
		fmt.Sscanf(order, "code-%d", &c)
		if c == codes.OK {
			return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
		}
		return nil, status.Errorf(c, "%s run %d", order, run)
	})
	_, cl := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "codes25d:")))
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		order := fmt.Sprintf("code-%d", c)
		kept := c == codes.OK || policy.DefaultFinalCodes.Has(c) && c != codes.Unauthenticated
		first := callWithin(cl, order, 5*time.Second)
		if first.code != c || first.replayed {
			t.Errorf("%s: the first caller got %v; want %s, not replayed", c, first, c)
			continue
		}
		ks, err := admin.Keys(context.Background(), "codes25d:*"+order).Result()
		if err != nil {
			t.Fatal(err)
		}
		again := callWithin(cl, order, 5*time.Second)
		switch {
		case kept:
			if again != (answered{id: first.id, code: first.code, msg: first.msg, replayed: true}) || srv.count(order) != 1 {
				t.Errorf("%s (kept): the repeat got %v after %v, the handler ran %d times; want the first's replayed, one run", c, again, first, srv.count(order))
			}
			if len(ks) != 1 {
				t.Errorf("%s (kept): Redis holds %q; want its entry", c, ks)
			} else if v, err := admin.Get(context.Background(), ks[0]).Result(); err != nil || v[0] != 'd' {
				t.Errorf("%s (kept): its entry %.1q %v; want done", c, v, err)
			}
		default:
			if again.code != c || again.replayed || again.msg != fmt.Sprintf("%s run 2", order) || srv.count(order) != 2 {
				t.Errorf("%s (forgotten): the repeat got %v, the handler ran %d times; want it run again (run 2)", c, again, srv.count(order))
			}
			if len(ks) != 0 {
				t.Errorf("%s (forgotten): Redis still holds %q once the first was answered; want the key freed", c, ks)
			}
		}
	}
}

// redisEntry is the state of the entry of order under prefix in Redis at
// admin: "" for none, "p" pending, "d" done.
func redisEntry(t *testing.T, admin interface {
	Keys(context.Context, string) *redis.StringSliceCmd
	Get(context.Context, string) *redis.StringCmd
}, prefix, order string) string {
	t.Helper()
	ks, err := admin.Keys(context.Background(), prefix+"*:"+order).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) == 0 {
		return ""
	}
	v, err := admin.Get(context.Background(), ks[0]).Result()
	if err != nil || v == "" {
		return ""
	}
	return v[:1]
}

// TestAttack25dRequestEndedMidHandlerOnRedis: "a request ended by its
// caller's cancellation or deadline … its retry runs the handler again",
// "so is any failure the handler gives once its request ended, whatever
// its code", "unless the handler made a call through ClientInterceptor
// that may have done work … an answer (a response) given after the
// ending is kept, always". On a real Redis, through a real gRPC client
// that cancels, or whose deadline passes, while the handler runs; the
// handler then gives an answer code of the defaults, a bare context
// error, or a response. What the caller's retry with the key gets, and how
// often the server ran the handler, are asserted.
func TestAttack25dRequestEndedMidHandlerOnRedis(t *testing.T) {
	r := startRedis(t)
	admin := client(t, r.addr)
	dep := dialDependency(t, &unavailableDep{})
	started := make(chan string, 1)
	end := map[string]func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error){
		"cancel-then-failed-precondition": func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error) {
			return nil, status.Errorf(codes.FailedPrecondition, "stock changed (%v)", ctx.Err())
		},
		"deadline-then-not-found": func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error) {
			return nil, status.Error(codes.NotFound, "no such sku")
		},
		"cancel-then-bare-context-error": func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error) {
			return nil, ctx.Err()
		},
		"deadline-then-answer": func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error) {
			return &inventoryv1.ReserveStockResponse{ReservationId: "late-answer"}, nil
		},
		"cancel-after-a-dependency-call-then-failed-precondition": func(ctx context.Context) (*inventoryv1.ReserveStockResponse, error) {
			return nil, status.Error(codes.FailedPrecondition, "stock changed")
		},
	}
	srv := newScripted(func(ctx context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		if run > 1 {
			return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
		}
		if order == "cancel-after-a-dependency-call-then-failed-precondition" {
			// The call fails UNAVAILABLE, not a Guard's refusal at the
			// ledger's door: it may have charged.
			_, _ = dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
		}
		started <- order
		<-ctx.Done()
		return end[order](ctx)
	})
	g, cl := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "ended25d:")))
	for _, tc := range []struct {
		order string
		kept  bool
	}{
		{"cancel-then-failed-precondition", false},
		{"deadline-then-not-found", false},
		{"cancel-then-bare-context-error", false},
		{"deadline-then-answer", true},
		{"cancel-after-a-dependency-call-then-failed-precondition", true},
	} {
		t.Run(tc.order, func(t *testing.T) {
			var ctx context.Context
			var cancel context.CancelFunc
			if tc.order[:6] == "cancel" {
				ctx, cancel = context.WithCancel(context.Background())
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			}
			defer cancel()
			got := make(chan answered, 1)
			go func() { got <- call(ctx, cl, tc.order) }()
			if o := <-started; o != tc.order {
				t.Fatalf("started %s, want %s", o, tc.order)
			}
			cancel()
			if a := <-got; a.code != codes.Canceled && a.code != codes.DeadlineExceeded {
				t.Fatalf("the first caller got %v; want its own ending", a)
			}
			// The handler returns once the server sees the ending; the
			// Guard then frees or writes the key.
			want := ""
			if tc.kept {
				want = "d"
			}
			eventually(t, "the key settled after the handler returned", func() bool { return redisEntry(t, admin, "ended25d:", tc.order) == want })
			again := callWithin(cl, tc.order, 5*time.Second)
			switch {
			case tc.kept:
				if !again.replayed || srv.count(tc.order) != 1 {
					t.Errorf("the retry got %v, the handler ran %d times; want the kept outcome replayed, one run", again, srv.count(tc.order))
				}
			default:
				if again.code != codes.OK || again.id != tc.order+"-2" || again.replayed {
					t.Errorf("the retry got %v, the handler ran %d times; want it run again (%s-2)", again, srv.count(tc.order), tc.order)
				}
			}
		})
	}
	eventually(t, "no place held", func() bool { return stats(t, g).InFlight == 0 })
}

// TestAttack25dHandlerPanicOnRedis: a handler that panics "under a
// recovering interceptor outside the Guard's" has its key freed, so a
// repeat runs again; "one inside, given after ServerOptions, hands the
// Guard an error, judged by its code like any other": INTERNAL, forgotten
// under the default FinalCodes, kept under one holding INTERNAL.
func TestAttack25dHandlerPanicOnRedis(t *testing.T) {
	r := startRedis(t)
	admin := client(t, r.addr)
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		if run == 1 {
			panic("reserve: nil map")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
	})
	internalKept := reserveStockPolicy(time.Second, policy.StoreErrorRefuse)
	internalKept.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	for _, tc := range []struct {
		name   string
		p      *policy.Server
		inside bool
		kept   bool
	}{
		{"recovered outside", reserveStockPolicy(time.Second, policy.StoreErrorRefuse), false, false},
		{"recovered inside, INTERNAL not final", reserveStockPolicy(time.Second, policy.StoreErrorRefuse), true, false},
		{"recovered inside, INTERNAL final", internalKept, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := "panic-" + tc.name
			prefix := fmt.Sprintf("panic25d%v%v:", tc.inside, tc.kept)
			g, err := server.NewGuard([]*policy.Server{tc.p}, server.WithStore(New(client(t, r.addr), prefix)))
			if err != nil {
				t.Fatal(err)
			}
			var opts []grpc.ServerOption
			if tc.inside {
				opts = append(g.ServerOptions(), grpc.ChainUnaryInterceptor(recoverUnary))
			} else {
				opts = append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary)}, g.ServerOptions()...)
			}
			cl := serveInventory(t, srv, opts...)
			if a := callWithin(cl, order, 5*time.Second); a.code != codes.Internal {
				t.Fatalf("the panicking run answered %v; want INTERNAL", a)
			}
			if e, want := redisEntry(t, admin, prefix, order), map[bool]string{false: "", true: "d"}[tc.kept]; e != want {
				t.Errorf("the entry once the caller was answered: %q, want %q", e, want)
			}
			again := callWithin(cl, order, 5*time.Second)
			if tc.kept {
				if again.code != codes.Internal || !again.replayed || srv.count(order) != 1 {
					t.Errorf("the repeat got %v, %d runs; want INTERNAL replayed, one run", again, srv.count(order))
				}
				return
			}
			if again.code != codes.OK || again.id != order+"-2" || srv.count(order) != 2 {
				t.Errorf("the repeat got %v, %d runs; want the handler run again", again, srv.count(order))
			}
		})
	}
}
