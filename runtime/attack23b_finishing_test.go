package runtime_test

// Attack on UnaryHandle.finishing (e044934): a call given grpc.OnFinish
// goes through a path of its own that repeats what Call does after its
// checks. Every option and input that changes what Call sends or answers
// is run both ways, without and with OnFinish, against a loopback server
// that records what it saw: the two must answer the same and send the
// same, and OnFinish runs once with what the caller got.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack23bSeen is what the server saw of one call.
type attack23bSeen struct {
	method   string
	key      []string // idempotency-key values
	priority []string
	subtype  []string // content-type: the keyed codec writes +proto
}

func (s attack23bSeen) String() string {
	return fmt.Sprintf("%s key=%q priority=%q content-type=%q", s.method, s.key, s.priority, s.subtype)
}

// TestAttack23bFinishingIsCall: one table of calls, each made without and
// with grpc.OnFinish (beside a grpc.Header option, so that the options are
// not the common empty ones either way). The server sees the same
// metadata (the request's key, a generated key in place of a forwarded
// one, the method's priority, the keyed codec's content subtype), the
// caller gets the same code and answer, a call refused or already over
// sends nothing either way, a fallback answers both ways; OnFinish runs
// once, with the error the caller got (nil for an answer).
func TestAttack23bFinishingIsCall(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	var seen []attack23bSeen
	failing := false
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, attack23bSeen{c.Method, md.Get("idempotency-key"), md.Get(runtime.PriorityHeader), md.Get("content-type")})
		if failing {
			return status.Error(codes.Unavailable, "attack23b: down")
		}
		return nil
	})
	plain := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Budget = nil, nil
	})
	rt, err := runtime.NewClient(&policy.Service{Name: attack20bDep, Methods: []policy.Method{{
		Name: atkGetStock, Kind: policy.KindUnary, GenerateIdempotencyKey: true, Timeout: 5 * time.Second,
		Priority: policy.PriorityHigh,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	generating, err := runtime.NewUnary(rt, atkGetStock, inventoryv1.NewInventoryServiceClient(rt.Conn(cc)).GetStock,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		t.Fatal(err)
	}
	falling := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		StockReportFallback: func(_ context.Context, _ *inventoryv1.StockReportRequest, err error) (*inventoryv1.StockReportResponse, error) {
			if status.Code(err) != codes.Unavailable {
				return nil, fmt.Errorf("attack23b: the fallback saw %v, want UNAVAILABLE", err)
			}
			return &inventoryv1.StockReportResponse{}, nil
		},
	}, func(p *policy.Service) { p.Breaker, p.Budget = nil, nil })

	base, cancelBase := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelBase()
	forwarded := metadata.AppendToOutgoingContext(base, "idempotency-key", "forwarded-23b")
	cancelled, cancel := context.WithCancel(base)
	cancel()
	expired, cancelExpired := context.WithDeadline(base, time.Now().Add(-time.Second))
	defer cancelExpired()

	type call struct {
		name string
		// do makes the call with opts; it returns the call's error and
		// whether the answer was the one wanted.
		do   func(opts []grpc.CallOption) (bool, error)
		code codes.Code
		fail bool // the server fails the call (the fallback's case)
	}
	var nilHeader *metadata.MD
	calls := []call{
		{"keyed, forwarded key, high priority", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(forwarded, &inventoryv1.ReserveStockRequest{OrderId: "o-23b", Sku: "a", Units: 1}, opts...)
			return r.GetReservationId() == "r-o-23b", err
		}, codes.OK, false},
		{"keyed, empty key", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(forwarded, &inventoryv1.ReserveStockRequest{Sku: "a", Units: 1}, opts...)
			return r.GetReservationId() == "r-", err
		}, codes.OK, false},
		{"no key, normal priority, forwarded key", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.GetStock(forwarded, &inventoryv1.GetStockRequest{Sku: "apple"}, opts...)
			return r.GetUnits() == 42, err
		}, codes.OK, false},
		{"generated key, forwarded key", func(opts []grpc.CallOption) (bool, error) {
			r, err := generating.Call(forwarded, &inventoryv1.GetStockRequest{Sku: "apple"}, opts...)
			return r.GetUnits() == 42, err
		}, codes.OK, false},
		{"priority lowered by the caller", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(runtime.WithPriority(base, policy.PriorityLow), &inventoryv1.ReserveStockRequest{OrderId: "o-low", Sku: "a", Units: 1}, opts...)
			return r.GetReservationId() == "r-o-low", err
		}, codes.OK, false},
		{"priority raised by the caller", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.StockReport(runtime.WithPriority(base, policy.PriorityCritical), &inventoryv1.StockReportRequest{}, opts...)
			return r != nil, err
		}, codes.OK, false},
		{"low priority", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.StockReport(base, &inventoryv1.StockReportRequest{}, opts...)
			return r != nil, err
		}, codes.OK, false},
		{"fallback", func(opts []grpc.CallOption) (bool, error) {
			r, err := falling.StockReport(base, &inventoryv1.StockReportRequest{}, opts...)
			return r != nil, err
		}, codes.OK, true},
		{"nil request", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(base, nil, opts...)
			return r == nil, err
		}, codes.InvalidArgument, false},
		{"nil option", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.GetStock(base, &inventoryv1.GetStockRequest{Sku: "apple"}, append([]grpc.CallOption{grpc.Header(nilHeader)}, opts...)...)
			return r == nil, err
		}, codes.InvalidArgument, false},
		{"key gRPC cannot carry", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(base, &inventoryv1.ReserveStockRequest{OrderId: "o\n", Sku: "a", Units: 1}, opts...)
			return r == nil, err
		}, codes.InvalidArgument, false},
		{"context cancelled, keyed", func(opts []grpc.CallOption) (bool, error) {
			r, err := plain.ReserveStock(cancelled, &inventoryv1.ReserveStockRequest{OrderId: "o-c", Sku: "a", Units: 1}, opts...)
			return r == nil, err
		}, codes.Canceled, false},
		{"context past its deadline, with a fallback", func(opts []grpc.CallOption) (bool, error) {
			r, err := falling.StockReport(expired, &inventoryv1.StockReportRequest{}, opts...)
			return r == nil, err
		}, codes.DeadlineExceeded, false},
	}
	for _, c := range calls {
		var got [2][]attack23bSeen
		var errs [2]error
		for i, withFinish := range []bool{false, true} {
			mu.Lock()
			seen, failing = nil, c.fail
			mu.Unlock()
			var f attack22aFinishes
			var hdr metadata.MD
			opts := []grpc.CallOption{grpc.Header(&hdr)}
			if withFinish {
				opts = append(opts, f.option())
			}
			ok, err := c.do(opts)
			errs[i] = err
			if status.Code(err) != c.code || !ok {
				t.Errorf("%s (OnFinish %v): ok %v, %v; want %v and its answer", c.name, withFinish, ok, err, c.code)
			}
			if withFinish {
				f.wantOnce(t, c.name, c.code)
				if fs := f.got(); len(fs) == 1 && fs[0] != err {
					t.Errorf("%s: OnFinish ran with %v, the caller got %v", c.name, fs[0], err)
				}
			}
			mu.Lock()
			got[i] = slices.Clone(seen)
			mu.Unlock()
		}
		if status.Convert(errs[0]).Message() != status.Convert(errs[1]).Message() {
			t.Errorf("%s: without OnFinish %v, with %v; want the same", c.name, errs[0], errs[1])
		}
		if len(got[0]) != len(got[1]) {
			t.Errorf("%s: the server saw %v without OnFinish, %v with", c.name, got[0], got[1])
			continue
		}
		if c.code != codes.OK && len(got[0]) != 0 {
			t.Errorf("%s: the server saw %v, want nothing sent", c.name, got[0])
		}
		for j := range got[0] {
			a, b := got[0][j], got[1][j]
			if c.name == "generated key, forwarded key" {
				// Each call generates its own: one key, never the forwarded one.
				if len(a.key) != 1 || len(b.key) != 1 || a.key[0] == "forwarded-23b" || b.key[0] == "forwarded-23b" {
					t.Errorf("%s: keys seen %q and %q, want one generated key each", c.name, a.key, b.key)
				}
				a.key, b.key = nil, nil
			}
			if a.String() != b.String() {
				t.Errorf("%s: the server saw\n\t%v without OnFinish,\n\t%v with", c.name, a, b)
			}
		}
	}
	_ = srv
}
