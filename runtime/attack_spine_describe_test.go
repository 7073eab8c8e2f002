package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Attacks on issue 11's spine in the runtime: Describe and Changes tell
// the policy in force, and no edit lands on another method.

func changesByKey(c *runtime.Client) map[string]runtime.Change {
	out := map[string]runtime.Change{}
	for _, ch := range c.Changes() {
		out[ch.Key] = ch
	}
	return out
}

// An edit of a method's priority is a change of the policy in force: the
// runtime sends it to the server on each call. Changes lists it and
// Describe shows it.
func TestAttackSpinePriorityEditIsListed(t *testing.T) {
	rt, err := runtime.NewClient(&inventoryv1.InventoryServiceResilientPolicy,
		runtime.WithPolicyFrom("edit", func(p *policy.Service) {
			p.Methods[3].Priority = policy.PriorityHigh // StockReport, annotated low
		}))
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := changesByKey(rt)["methods.StockReport.priority"]
	if !ok || ch.Annotated != "low" || ch.Value != "high" || ch.Source != "edit" {
		t.Errorf("StockReport's priority: %+v (listed: %v), want low → high from edit; changes %+v", ch, ok, rt.Changes())
	}
	if d := rt.Describe(); !strings.Contains(d, "priority: high") {
		t.Errorf("Describe does not show StockReport's priority in force:\n%s", d)
	}
}

// A value two edits move shows the later edit as its source and its value
// in force; one set back to the annotation's is no change.
func TestAttackSpineTwoEditsShowTheLast(t *testing.T) {
	rt, err := runtime.NewClient(&inventoryv1.InventoryServiceResilientPolicy,
		runtime.WithPolicyFrom("first", func(p *policy.Service) {
			p.Methods[0].Timeout = 100 * time.Millisecond
			p.Breaker.CoolDown = 7 * time.Second
			p.Methods[3].Timeout = time.Second
		}),
		runtime.WithPolicyFrom("second", func(p *policy.Service) {
			// Found by name: the methods are in another order now.
			for i := range p.Methods {
				switch p.Methods[i].Name {
				case inventoryv1.InventoryService_GetStock_FullMethodName:
					p.Methods[i].Timeout = 120 * time.Millisecond
				case inventoryv1.InventoryService_StockReport_FullMethodName:
					p.Methods[i].Timeout = 300 * time.Millisecond // back to the annotation's
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	got := changesByKey(rt)
	if ch := got["methods.GetStock.timeout"]; ch.Annotated != "300ms" || ch.Value != "120ms" || ch.Source != "second" {
		t.Errorf("GetStock's timeout: %+v, want 300ms → 120ms from second", ch)
	}
	if ch := got["circuit_breaker.cool_down"]; ch.Annotated != "2s" || ch.Value != "7s" || ch.Source != "first" {
		t.Errorf("the cool-down: %+v, want 2s → 7s from first", ch)
	}
	if ch, ok := got["methods.StockReport.timeout"]; ok {
		t.Errorf("StockReport's timeout, set back to the annotation's, is listed: %+v", ch)
	}
	if p := rt.Policy(); p.Methods[0].Timeout != 120*time.Millisecond || p.Breaker.CoolDown != 7*time.Second {
		t.Errorf("in force: GetStock %s, cool-down %s", p.Methods[0].Timeout, p.Breaker.CoolDown)
	}
}

// An edit that takes the service's budget away leaves the default budget
// in force (NewClient builds one for the methods that retry): Changes must
// not say the budget is gone (it listed "retry_budget.ratio: 0.1 → none",
// and Describe showed no budget).
func TestAttackSpineBudgetTakenAwayIsTheDefault(t *testing.T) {
	rt, err := runtime.NewClient(&inventoryv1.InventoryServiceResilientPolicy,
		runtime.WithPolicy(func(p *policy.Service) { p.Budget = &policy.Budget{Ratio: 0.3, MinRetries: 1, Window: time.Second} }),
		runtime.WithPolicy(func(p *policy.Service) { p.Budget = nil }))
	if err != nil {
		t.Fatal(err)
	}
	// The default is inventory's annotated budget: nothing changed.
	for key, ch := range changesByKey(rt) {
		if strings.HasPrefix(key, "retry_budget.") {
			t.Errorf("Changes lists %s: %s → %s, yet the default budget, the annotated one, is in force", key, ch.Annotated, ch.Value)
		}
	}
	if d := rt.Describe(); !strings.Contains(d, "  retry_budget (default: the service sets none, and a method retries or hedges): ratio 0.1, min_retries 10, window 10s\n") {
		t.Errorf("Describe does not show the default budget in force:\n%s", d)
	}
	// A service without a budget whose method an edit makes retry: the
	// default comes into force, and is listed so.
	p := policy.Service{Name: "pkg.S", Methods: []policy.Method{{Name: "/pkg.S/M", Idempotent: true, Timeout: time.Second}}}
	rt, err = runtime.NewClient(&p, runtime.WithPolicyFrom("edit", func(p *policy.Service) {
		p.Methods[0].Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: 1, MaxBackoff: 1, Multiplier: 1, RetryableCodes: 1 << 14}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if ch := changesByKey(rt)["retry_budget.ratio"]; ch.Annotated != "none" || ch.Value != "0.1" || ch.Source != "edit" {
		t.Errorf("the default budget brought in by a retry: %+v, want none → 0.1 from edit", ch)
	}
}

// Reordered, the methods keep their own policies on a real server: with
// GetStock given 5 attempts and StockReport 2 by an edit that also
// reverses the entries, the server sees 5 and 2, and ReserveStock keeps
// its annotated 3.
func TestAttackSpineReorderedEditCountedOnTheServer(t *testing.T) {
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	retry := func(n int) *policy.Retry {
		return &policy.Retry{MaxAttempts: n, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	}
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
			for i, j := 0, len(p.Methods)-1; i < j; i, j = i+1, j-1 {
				p.Methods[i], p.Methods[j] = p.Methods[j], p.Methods[i]
			}
			for i := range p.Methods {
				m := &p.Methods[i]
				if m.Kind == policy.KindUnary {
					m.Timeout = 10 * time.Second // the count, not the machine's load, decides
				}
				switch m.Name {
				case inventoryv1.InventoryService_GetStock_FullMethodName:
					m.Retry, m.Cache = retry(5), nil
				case inventoryv1.InventoryService_StockReport_FullMethodName:
					m.Retry = retry(2)
				}
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("GetStock: %v", err)
	}
	_, err = inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("StockReport: %v", err)
	}
	_, err = inv.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("ReserveStock: %v", err)
	}
	for name, want := range map[string]int{
		inventoryv1.InventoryService_GetStock_FullMethodName:     5,
		inventoryv1.InventoryService_StockReport_FullMethodName:  2,
		inventoryv1.InventoryService_ReserveStock_FullMethodName: 3,
	} {
		if got := fs.Calls(name); got != want {
			t.Errorf("%s: the server saw %d attempts, want %d", name, got, want)
		}
	}
}

// Edits that could only be wrong, each refused naming the method, never a
// panic: a Kind out of range, an entry with an empty name, the Methods
// slice set to nil, a method's retry set on a stream.
func TestAttackSpineHostileEditsRefused(t *testing.T) {
	const watch = inventoryv1.InventoryService_WatchStock_FullMethodName
	for name, tc := range map[string]struct {
		edit func(p *policy.Service)
		want string
	}{
		"kind out of range": {func(p *policy.Service) { p.Methods[2].Kind = 200 }, watch + ": Kind changed from server-streaming to Kind(200)"},
		"empty name":        {func(p *policy.Service) { p.Methods[2].Name = "" }, watch + ": its entry was removed or renamed"},
		"methods nil":       {func(p *policy.Service) { p.Methods = nil }, inventoryv1.InventoryService_GetStock_FullMethodName + ": its entry was removed or renamed"},
		"retry on a stream": {func(p *policy.Service) {
			p.Methods[2].Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
			p.Methods[2].Idempotent = false
		}, "streams are not retried"},
		// Accepted before: the client was built under another name, and
		// Changes did not list it.
		"service name changed": {func(p *policy.Service) { p.Name = "other.Service" }, `Name changed to "other.Service"`},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				_, err = runtime.NewClient(&inventoryv1.InventoryServiceResilientPolicy, runtime.WithPolicy(tc.edit))
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// Describe says which layers each method goes through. Opening a stream
// takes no token of the rate limit: with a shared limit of one call per
// second, three unary calls find one token and three streams all open, and
// Describe must not list the shared rate limit under the stream.
func TestAttackSpineDescribeStreamTakesNoToken(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1, Burst: 1}
			for i := range p.Methods {
				if p.Methods[i].Kind == policy.KindUnary {
					p.Methods[i].Timeout = 10 * time.Second
				}
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limited := 0
	for range 3 {
		_, err := inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
		if errors.Is(err, runtime.ErrRateLimited) {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited != 2 {
		t.Fatalf("%d of 3 unary calls rate limited, want 2: the limit is not in force", limited)
	}
	for i := range 3 {
		st, err := inv.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
	}
	if n := fs.Calls(inventoryv1.InventoryService_WatchStock_FullMethodName); n != 3 {
		t.Fatalf("the server saw %d streams, want 3", n)
	}
	d := inv.Runtime().Describe()
	_, watch, _ := strings.Cut(d, inventoryv1.InventoryService_WatchStock_FullMethodName+"\n")
	watch, _, _ = strings.Cut(watch, "  /")
	if strings.Contains(watch, "rate limit") {
		t.Errorf("Describe lists a rate limit under WatchStock, whose streams take no token:\n%s", watch)
	}
}

// Each method's timeout is its own after a reordering edit, on a server
// that hangs: GetStock, given 40ms, ends after about 40ms, StockReport
// keeps its annotated 300ms.
func TestAttackSpineReorderedTimeoutsBounded(t *testing.T) {
	fs, cc := startFault(t, server.Hang)
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Methods[0], p.Methods[3] = p.Methods[3], p.Methods[0]
			for i := range p.Methods {
				if p.Methods[i].Name == inventoryv1.InventoryService_GetStock_FullMethodName {
					p.Methods[i].Timeout, p.Methods[i].Retry, p.Methods[i].Cache = 40*time.Millisecond, nil, nil
				}
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Connect first, so that the times below are the calls'.
	cc.Connect()
	ctx := context.Background()
	start := time.Now()
	_, err = inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
	if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took < 40*time.Millisecond || took > 250*time.Millisecond {
		t.Errorf("GetStock: %v after %v, want DEADLINE_EXCEEDED after its own 40ms", err, took)
	}
	start = time.Now()
	_, err = inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
	if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took < 300*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("StockReport: %v after %v, want DEADLINE_EXCEEDED after its annotated 300ms", err, took)
	}
	if n := fs.Calls(inventoryv1.InventoryService_GetStock_FullMethodName); n != 1 {
		t.Errorf("GetStock: %d attempts, want 1 (its retry was removed)", n)
	}
}
