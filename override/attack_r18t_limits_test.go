package override_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18tDescribedLimitsHold overrides the example's shared rate
// limit and breaker (a variable, a file, then WithPolicy), gives
// StockReport a bucket of its own by the file, and checks the numbers
// Describe prints against what a loopback server sees: the shared bucket
// admits its burst of calls and refuses the next without sending it,
// StockReport's own bucket is not drained by the shared one's calls, and
// the shared breaker opens once minimum_calls attempts (GetStock's three
// per call) have failed, after which no call reaches the server.
func TestAttackR18tDescribedLimitsHold(t *testing.T) {
	file := []byte(`services:
  example.inventory.v1.InventoryService:
    rate_limit: {requests_per_second: 0.001, burst: 40, max_wait: 0s}
    circuit_breaker: {minimum_calls: 30, failure_ratio: 0.5, window: 1m}
    methods:
      StockReport:
        rate_limit: {per_method: true, burst: 2}
`)
	env := []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__MINIMUM_CALLS=6"}
	c, fs, cc := r18tClient(t, "o.yaml", file, env, func(p *policy.Service) { p.RateLimit.Burst = 3 })
	desc := c.Runtime().Describe()
	num := func(re string) int { t.Helper(); return describedNum(t, desc, re) }
	burst := num(`(?m)^  rate_limit \(shared\): requests_per_second \S+, burst (\d+),`)
	own := num(`(?m)^    rate_limit \(own\): requests_per_second \S+, burst (\d+),`)
	minCalls := num(`(?m)^  circuit_breaker \(shared\): failure_ratio \S+, minimum_calls (\d+),`)
	if burst != 3 || own != 2 || minCalls != 6 {
		t.Fatalf("Describe: shared burst %d, StockReport's own burst %d, minimum_calls %d; the last edits set 3, 2, 6:\n%s", burst, own, minCalls, desc)
	}
	if !strings.Contains(desc, "    rate_limit (own)") || strings.Count(desc, "    rate_limit (own)") != 1 {
		t.Fatalf("want StockReport alone with a bucket of its own:\n%s", desc)
	}
	ctx := context.Background()
	const report = "/example.inventory.v1.InventoryService/StockReport"
	const reserve = "/example.inventory.v1.InventoryService/ReserveStock"
	const get = "/example.inventory.v1.InventoryService/GetStock"

	// Tokens: the shared bucket's burst, then a refusal nobody sent.
	for i := range burst {
		if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: fmt.Sprint("o", i)}); err != nil {
			t.Fatalf("ReserveStock %d of a burst of %d: %v", i+1, burst, err)
		}
	}
	if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "over"}); status.Code(err) == codes.OK {
		t.Errorf("ReserveStock past the shared burst of %d was admitted", burst)
	}
	if got := fs.Calls(reserve); got != burst {
		t.Errorf("Describe says burst %d; the server saw %d ReserveStock calls", burst, got)
	}
	// StockReport's own bucket is untouched by the shared one's calls.
	for i := range own {
		if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}); err != nil {
			t.Fatalf("StockReport %d of its own burst of %d: %v", i+1, own, err)
		}
	}
	if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}); status.Code(err) == codes.OK {
		t.Errorf("StockReport past its own burst of %d was admitted", own)
	}
	if got := fs.Calls(report); got != own {
		t.Errorf("Describe says StockReport's own burst is %d; the server saw %d", own, got)
	}

	// The breaker: a client of its own, whose bucket does not refuse.
	set2, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n    circuit_breaker: {failure_ratio: 0.5, window: 1m}\n"), env, inventory)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: set2.Options(inventory)})
	if err != nil {
		t.Fatal(err)
	}
	if d := c2.Runtime().Describe(); !strings.Contains(d, "circuit_breaker (shared): failure_ratio 0.5, minimum_calls 6, window 1m0s,") ||
		!strings.Contains(d, "retry: max_attempts 3,") {
		t.Fatalf("Describe of the second client:\n%s", d)
	}
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	for i := range 2 {
		if _, err := c2.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)}); status.Code(err) != codes.Unavailable {
			t.Fatalf("GetStock %d: %v", i, err)
		}
	}
	if got := fs.Calls(get); got != minCalls {
		t.Fatalf("two GetStock calls of 3 attempts: the server saw %d attempts, want %d", got, minCalls)
	}
	// The README's option table says what was just measured: the window
	// counts attempts, not calls.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `circuit_breaker.minimum_calls` \\|.*$").Find(readme)
	if !strings.Contains(string(row), "| attempts |") || !strings.Contains(string(row), "each attempt is one") {
		t.Errorf("the README's row of minimum_calls does not say the window counts attempts (%d attempts of 2 calls opened it):\n%s", minCalls, row)
	}
	if st, _ := c2.Runtime().BreakerState(get); st != runtime.StateOpen {
		t.Errorf("after minimum_calls %d failed attempts the breaker is %v, want open", minCalls, st)
	}
	_, err = c2.StockReport(ctx, &inventoryv1.StockReportRequest{})
	if !errors.Is(err, runtime.ErrCircuitOpen) || fs.Calls(report) != own {
		t.Errorf("StockReport after the shared breaker opened: %v, the server saw %d StockReport calls (want %d)", err, fs.Calls(report), own)
	}
}
