package example_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Attacks on issue 11's spine through the generated clients, counted on a
// real loopback server: which policy a method really got.

const charge = paymentsv1.PaymentsService_Charge_FullMethodName

// fastRetry is a retry that would repeat an UNAVAILABLE call 5 times at once.
func fastRetry() *policy.Retry {
	return &policy.Retry{MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

// Client.Policy shows the policy in force; writing to what it returns must
// not change what a running client does. Charge is not idempotent: a
// program that "tweaks" the policy it reads back must never get a charge
// repeated.
func TestAttackSpinePolicyOfARunningClientIsReadOnly(t *testing.T) {
	srv, cc := dial(t, server.Fail(codes.Unavailable))
	pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := pay.Runtime().Policy()
	p.Methods[0].Idempotent = true
	p.Methods[0].Retry = fastRetry()
	p.Methods[0].Timeout = 0
	p.Breaker = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pay.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: "o-1", AmountCents: 100})
	checkUnavailable(t, "Charge", err)
	if n := srv.Calls(charge); n != 1 {
		t.Errorf("the server saw %d charges for one call, want 1: writing to Client.Policy() changed the running client", n)
	}
	q := pay.Runtime().Policy()
	if q.Methods[0].Idempotent || q.Methods[0].Retry != nil || q.Breaker == nil {
		t.Errorf("Client.Policy() shows the caller's writes, not the policy in force: %+v", q.Methods[0])
	}
	if d := pay.Runtime().Describe(); strings.Contains(d, "idempotent: true") || !strings.Contains(d, "    circuit_breaker: shared\n") {
		t.Errorf("Describe shows the caller's writes:\n%s", d)
	}
}

// The same through a method with retries: raising MaxAttempts on what
// Policy returns leaves GetStock at its 3 attempts, and the time of a
// call stays bounded by the annotated per-attempt timeout.
func TestAttackSpinePolicyOfARunningClientCannotRaiseAttempts(t *testing.T) {
	srv, inv, err := edited(t, patient)
	if err != nil {
		t.Fatal(err)
	}
	p := inv.Runtime().Policy()
	for i := range p.Methods {
		p.Methods[i].Retry = fastRetry()
		p.Methods[i].Idempotent = true
	}
	want := map[string]int{"GetStock": 3, "ReserveStock": 3, "StockReport": 1}
	if got := attempts(t, srv, inv); !maps.Equal(got, want) {
		t.Errorf("attempts seen by the server = %v, want %v: Client.Policy() reached the running client", got, want)
	}
}

// A WithPolicy edit gets a deep copy: changing a cache's KeyFields in
// place is an edit of the copy, refused (the generated key function reads
// sku), and never a change of the generated literal every later client
// is built from.
func TestAttackSpineEditOfKeyFieldsInPlaceIsRefusedAndLeavesTheLiteral(t *testing.T) {
	lit := &inventoryv1.InventoryServiceResilientPolicy
	before := slices.Clone(lit.Methods[0].Cache.KeyFields)
	defer func() { lit.Methods[0].Cache.KeyFields = before }()
	srv, inv, err := edited(t, runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Cache.KeyFields[0] = "warehouse"
	}))
	if got := lit.Methods[0].Cache.KeyFields; !slices.Equal(got, before) {
		t.Errorf("the generated literal's KeyFields became %q (were %q): the edit reached it", got, before)
	}
	if err == nil {
		t.Errorf("an edit of KeyFields in place was accepted; GetStock made %d attempts", attemptsOf(srv, inv))
	} else if !strings.Contains(err.Error(), getStock) || !strings.Contains(err.Error(), "KeyFields changed") {
		t.Errorf("err = %v, want the refusal naming %s and KeyFields", err, getStock)
	}
	// A client built afterwards, without edits, sees the annotation.
	_, inv2, err := edited(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv2.Runtime().Policy().Methods[0].Cache.KeyFields; !slices.Equal(got, []string{"sku"}) {
		t.Errorf("a later client's KeyFields = %q, want [sku]", got)
	}
}

// Overrides loaded for one service and passed, by a copy-and-paste slip,
// to the client of another must not land on the other service's methods:
// the client is refused naming the mix-up, never built with inventory's
// values on payments (never a panic).
func TestAttackSpineOverridesOfAnotherServiceAreRefused(t *testing.T) {
	inv := &inventoryv1.InventoryServiceResilientPolicy
	pay := &paymentsv1.PaymentsServiceResilientPolicy
	for name, file := range map[string]string{
		"service timeout": `
services:
  example.inventory.v1.InventoryService:
    timeout: 1ms
`,
		"method hedging": `
services:
  example.inventory.v1.InventoryService:
    methods:
      StockReport:
        hedging: {delay: 10ms}
`,
		"shared breaker": `
services:
  example.inventory.v1.InventoryService:
    circuit_breaker: {minimum_calls: 1, failure_ratio: 0.01}
`,
	} {
		t.Run(name, func(t *testing.T) {
			set, err := override.Parse("overrides.yaml", []byte(file), nil, inv, pay)
			if err != nil {
				t.Fatal(err)
			}
			srv, cc := dial(t, server.Slow(20*time.Millisecond))
			var c *paymentsv1.PaymentsServiceResilientClient
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("building the payments client with inventory's overrides panicked: %v", r)
					}
				}()
				c, err = paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{
					Runtime: set.Options(inv), // the slip: inventory's, not pay's
				})
			}()
			if err == nil && c != nil {
				_, callErr := c.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o-1", AmountCents: 1})
				t.Errorf("the payments client was built with inventory's overrides: Charge got %v (server saw %d), changes %v",
					callErr, srv.Calls(charge), c.Runtime().Changes())
				return
			}
			if err != nil && !strings.Contains(err.Error(), "example.inventory.v1.InventoryService") {
				t.Errorf("err = %v, want it to name the service the overrides are for", err)
			}
		})
	}
}

// An edit that makes two methods share one Retry value (a program's
// shortcut, p.Methods[3].Retry = p.Methods[0].Retry), followed by an
// override of one of them: the override lands on its method only, and
// the other keeps the edit's value. Counted on the server.
func TestAttackSpineOverrideDoesNotLeakThroughAnAliasedEdit(t *testing.T) {
	opts := overriddenAfter(t, `
services:
  example.inventory.v1.InventoryService:
    methods:
      StockReport:
        retry: {max_attempts: 5, initial_backoff: 1ms, max_backoff: 1ms}
`, patient, runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Cache = nil
		p.Methods[3].Retry = p.Methods[0].Retry // StockReport retries as GetStock does: 3 attempts
	}))
	srv, inv, err := edited(t, opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"GetStock": 3, "ReserveStock": 3, "StockReport": 5}
	if got := attempts(t, srv, inv); !maps.Equal(got, want) {
		t.Errorf("attempts seen by the server = %v, want %v: StockReport's override reached GetStock", got, want)
	}
	for _, ch := range inv.Runtime().Changes() {
		if strings.HasPrefix(ch.Key, "methods.GetStock.retry.") {
			t.Errorf("Changes lists %+v: GetStock's retry is as annotated", ch)
		}
	}
}

// Clients built at once from the one generated literal, each with an edit
// that writes into every part of its copy (KeyFields included), share
// nothing: no data race (-race), and each sees the annotation.
func TestAttackSpineConcurrentEditsShareNothing(t *testing.T) {
	_, cc := dial(t, server.Healthy)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
					if got := p.Methods[0].Cache.KeyFields; !slices.Equal(got, []string{"sku"}) {
						t.Errorf("an edit received KeyFields %q, want the annotation's [sku]", got)
					}
					p.Methods[0].Cache.KeyFields[0] = "warehouse"
					p.Methods[0].Retry.MaxAttempts = 9
					p.Breaker.CoolDown = time.Hour
				})},
			})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "KeyFields changed") {
			t.Errorf("err = %v, want the KeyFields refusal", err)
		}
	}
	lit := &inventoryv1.InventoryServiceResilientPolicy
	if lit.Methods[0].Retry.MaxAttempts != 3 || lit.Breaker.CoolDown != 2*time.Second || lit.Methods[0].Cache.KeyFields[0] != "sku" {
		t.Errorf("the literal changed: %+v %+v", lit.Methods[0], lit.Breaker)
	}
}

// The literal changed after the client is built changes nothing the
// client does: NewClient keeps a deep copy.
func TestAttackSpineLiteralChangedAfterBuildIsNotSeen(t *testing.T) {
	srv, inv, err := edited(t, patient)
	if err != nil {
		t.Fatal(err)
	}
	lit := &inventoryv1.InventoryServiceResilientPolicy
	saved := lit.Clone()
	defer func() { *lit = saved }()
	lit.Methods[0].Retry.MaxAttempts = 1
	lit.Methods[0].Cache.KeyFields[0] = "warehouse"
	lit.Methods[3].Retry = fastRetry()
	lit.Methods[1].IdempotencyKey = ""
	want := map[string]int{"GetStock": 3, "ReserveStock": 3, "StockReport": 1}
	if got := attempts(t, srv, inv); !maps.Equal(got, want) {
		t.Errorf("attempts seen by the server = %v, want %v: the running client follows the literal", got, want)
	}
	if keys := srv.Keys(reserveStock); len(keys) != 3 || keys[0] != "o-1" {
		t.Errorf("ReserveStock's keys = %q, want o-1 on each of 3 attempts", keys)
	}
	if got := inv.Runtime().Policy().Methods[0].Cache.KeyFields; !slices.Equal(got, []string{"sku"}) {
		t.Errorf("the client's KeyFields = %q, want [sku]", got)
	}
}

// An edit of the service's shared layers reaches every method that shares
// them, and no other: with the shared breaker taken away, every call
// reaches a failing server; with StockReport given a breaker of its own,
// only that one opens, and GetStock's, the shared one, stays closed.
func TestAttackSpineSharedBreakerEdits(t *testing.T) {
	count := func(t *testing.T, edit func(p *policy.Service)) (report, get int, getState runtime.State) {
		t.Helper()
		srv, inv, err := edited(t, patient, runtime.WithPolicy(edit))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for range 25 {
			inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"}) //nolint:errcheck
		}
		inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}) //nolint:errcheck
		getState, _ = inv.Runtime().BreakerState(getStock)
		return srv.Calls(stockReport), srv.Calls(getStock), getState
	}
	// As annotated: the shared breaker opens after its 20 calls, and
	// GetStock, sharing it, is refused at once.
	report, get, state := count(t, func(p *policy.Service) { p.Methods[0].Cache = nil })
	if report != 20 || get != 0 || state != runtime.StateOpen {
		t.Errorf("as annotated: StockReport %d, GetStock %d calls, its breaker %v; want 20, 0, open", report, get, state)
	}
	// No shared breaker: every call reaches the server.
	report, get, _ = count(t, func(p *policy.Service) { p.Methods[0].Cache, p.Breaker = nil, nil })
	if report != 25 || get != 3 {
		t.Errorf("without the shared breaker: StockReport %d, GetStock %d calls; want 25, 3", report, get)
	}
	// StockReport with a breaker of its own: it opens; GetStock's, the
	// shared one, saw none of its failures.
	report, get, state = count(t, func(p *policy.Service) {
		p.Methods[0].Cache = nil
		own := *p.Breaker
		p.Methods[3].Breaker = &own
	})
	if report != 20 || get != 3 || state != runtime.StateClosed {
		t.Errorf("StockReport's own breaker: StockReport %d, GetStock %d calls, the shared breaker %v; want 20, 3, closed", report, get, state)
	}
}

// Hedging an override adds to one method lands there: against a server
// slower than the delay, StockReport sends its 3 copies, GetStock (after
// it, on the same slow server) one attempt.
func TestAttackSpineHedgingOverrideLandsOnItsMethod(t *testing.T) {
	opts := overriddenAfter(t, `
services:
  example.inventory.v1.InventoryService:
    timeout: 2s
    methods:
      StockReport: {hedging: {delay: 20ms, max_copies: 3}}
`, runtime.WithPolicy(func(p *policy.Service) { slices.Reverse(p.Methods) }))
	srv, cc := dial(t, server.Slow(150*time.Millisecond))
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls(stockReport); n != 3 {
		t.Errorf("StockReport: the server saw %d copies, want 3", n)
	}
	if n := srv.Calls(getStock); n != 1 {
		t.Errorf("GetStock: the server saw %d attempts, want 1", n)
	}
	if d := inv.Runtime().Describe(); !strings.Contains(d, "/StockReport\n    unary, idempotent: true, idempotency_key: none, timeout: 2s, overall_timeout: none, priority: low\n    retry: none\n    circuit_breaker: shared\n    bulkhead: shared\n    hedging: delay 20ms, max_copies 3, non_fatal_codes [UNAVAILABLE]\n") {
		t.Errorf("Describe does not show StockReport's hedging:\n%s", d)
	}
}
