package runtime_test

// Attack on Client.Policy, "a deep copy: writing to it changes nothing the
// client does": every value of the copy is written, from many goroutines,
// while calls run (the race detector sees any value the copy shares with
// the client), and the client's policy, its description and what the
// server sees stay those of the policy it was built with.

import (
	"context"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18Scribble writes every value reachable from v: numbers to their
// largest, strings to "scribbled", booleans flipped, slices' elements; a
// pointer's target is written, then the pointer is set to nil.
func r18Scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			r18Scribble(v.Elem())
			if v.CanSet() {
				v.SetZero()
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				r18Scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			r18Scribble(v.Index(i))
		}
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(math.MaxInt64 >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(math.MaxUint64 >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(math.Inf(-1))
	}
}

func TestAttackR18WritingThePolicysCopyChangesNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil // 3 attempts for each call, whatever the ratio of failures
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	rt := c.Runtime()
	want, wantDesc := rt.Policy(), rt.Describe()
	p := rt.Policy()
	r18Scribble(reflect.ValueOf(p))
	if reflect.DeepEqual(p, want) {
		t.Fatal("r18Scribble changed nothing of a copy: the test would prove nothing")
	}

	const callers, calls = 8, 5 // callers ≤ the bulkhead's 8 permits: none refused
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for range callers {
		wg.Go(func() {
			for range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				errs <- err
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 20 {
				r18Scribble(reflect.ValueOf(rt.Policy()))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a call: %v, want UNAVAILABLE after 3 attempts", err)
			break
		}
	}
	if got := rt.Policy(); !reflect.DeepEqual(got, want) {
		t.Errorf("the client's policy changed after its copies were written:\n got %+v\nwant %+v", got, want)
	}
	if got := rt.Describe(); got != wantDesc {
		t.Errorf("Describe changed after the policy's copies were written:\n got %s\nwant %s", got, wantDesc)
	}
	if n := fs.Calls(atkGetStock); n != callers*calls*3 {
		t.Errorf("the server saw %d calls, want %d: 3 attempts for each of %d calls, as the policy built says",
			n, callers*calls*3, callers*calls)
	}
}
