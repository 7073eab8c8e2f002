package runtime_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// crowded is the inventory policy with every group the runtime knows in
// use somewhere: a count window on a method's own breaker, a method's
// rate limit and adaptive limit, hedging, a throttle.
func crowded(p *policy.Service) {
	p.AdaptiveLimit = &policy.AdaptiveLimit{}
	p.ClientThrottle = &policy.Throttle{}
	get, reserve, report := &p.Methods[0], &p.Methods[1], &p.Methods[3]
	get.RateLimit = &policy.RateLimit{RequestsPerSecond: 100, Burst: 10, MaxWait: time.Millisecond}
	get.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: 4}
	reserve.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 5, WindowCalls: 10, CoolDown: time.Second,
		HalfOpenProbes: 1, SlowCallThreshold: time.Second, FailureCodes: p.Breaker.FailureCodes}
	report.Hedging = &policy.Hedging{Delay: 50 * time.Millisecond, MaxCopies: 2, NonFatalCodes: p.Breaker.FailureCodes}
}

// leaves lists the settable numbers of v (pointers followed), with their
// Go path.
func leaves(v reflect.Value, path string, out *[]struct {
	path string
	v    reflect.Value
}) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			leaves(v.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() && f.Name != "Kind" && f.Name != "Priority" {
				leaves(v.Field(i), path+"."+f.Name, out)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				leaves(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	case reflect.Int, reflect.Int64, reflect.Float64:
		*out = append(*out, struct {
			path string
			v    reflect.Value
		}{path, v})
	}
}

// Every number of a policy set, one at a time, to an extreme (the largest
// int, the longest duration, a negative, zero, NaN, infinities, the
// smallest positive float): NewClient refuses it or builds a client whose
// calls end within their deadline. Never a panic, a hang or a leaked
// goroutine.
func TestAttackSpineExtremeValues(t *testing.T) {
	t.Run("healthy", func(t *testing.T) { extremes(t, server.Healthy) })
	t.Run("unavailable", func(t *testing.T) { extremes(t, server.Fail(codes.Unavailable)) })
	t.Run("slow", func(t *testing.T) { extremes(t, server.Slow(5*time.Millisecond)) })
}

func extremes(t *testing.T, b server.Behaviour) {
	_, cc := startFault(t, b)
	base := inventoryv1.InventoryServiceResilientPolicy.Clone()
	crowded(&base)
	if _, err := runtime.NewClient(&base); err != nil {
		t.Fatalf("the crowded policy is refused: %v", err)
	}
	var ls []struct {
		path string
		v    reflect.Value
	}
	leaves(reflect.ValueOf(&base), "p", &ls)
	ints := []int64{math.MaxInt64, math.MinInt64, -1, 0, 1}
	floats := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, math.MaxFloat64, -1, 0}
	accepted, refused := 0, 0
	for i, l := range ls {
		var values []any
		if l.v.Kind() == reflect.Float64 {
			for _, f := range floats {
				values = append(values, f)
			}
		} else {
			for _, n := range ints {
				values = append(values, n)
			}
		}
		for _, x := range values {
			edit := func(p *policy.Service) {
				var got []struct {
					path string
					v    reflect.Value
				}
				leaves(reflect.ValueOf(p), "p", &got)
				switch x := x.(type) {
				case float64:
					got[i].v.SetFloat(x)
				case int64:
					got[i].v.SetInt(x)
				}
			}
			var inv *inventoryv1.InventoryServiceResilientClient
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s = %v: NewClient panicked: %v", l.path, x, r)
					}
				}()
				inv, err = inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
					Runtime: []runtime.Option{runtime.WithPolicy(crowded), runtime.WithPolicy(edit)},
				})
			}()
			if err != nil || inv == nil {
				refused++
				continue
			}
			accepted++
			callAll(t, fmt.Sprintf("%s = %v", l.path, x), inv)
		}
	}
	t.Logf("%d values: %d accepted, %d refused", len(ls), accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Errorf("accepted %d, refused %d: the sweep tests nothing", accepted, refused)
	}
}

// callAll calls every method once under a 2s deadline: each must end by
// then (an error is fine), and never panic.
func callAll(t *testing.T, what string, inv *inventoryv1.InventoryServiceResilientClient) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: a call panicked: %v", what, r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})                                 //nolint:errcheck
	inv.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1}) //nolint:errcheck
	inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})                     //nolint:errcheck
	if st, err := inv.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); err == nil {
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("%s: the calls took %v, past their 2s deadline", what, took)
	}
}
