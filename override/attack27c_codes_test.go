package override_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack27CDescribedCodesAreTheCodesRetried: Describe after an
// override lists the retryable codes in force, and those are the codes the
// runtime retries, no more: StockReport (no retry in the .proto) is given
// a retry by the file, whose codes a variable replaces with ABORTED and
// RESOURCE_EXHAUSTED. Against a server answering ABORTED it makes
// max_attempts attempts; against UNAVAILABLE (the file's code, replaced,
// and the default's) one, as Describe's list says.
func TestAttack27CDescribedCodesAreTheCodesRetried(t *testing.T) {
	file := []byte(`services:
  example.inventory.v1.InventoryService:
    methods:
      StockReport:
        retry: {max_attempts: 3, initial_backoff: 1ms, max_backoff: 2ms, retryable_codes: [UNAVAILABLE]}
`)
	env := []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__STOCKREPORT__RETRY__RETRYABLE_CODES=ABORTED, RESOURCE_EXHAUSTED"}
	c, fs, _ := r18tClient(t, "overrides.yaml", file, env, func(*policy.Service) {})
	desc := c.Runtime().Describe()
	para := desc[strings.Index(desc, "  /example.inventory.v1.InventoryService/StockReport\n"):]
	if i := strings.Index(para[3:], "\n  /"); i > 0 {
		para = para[:i+3]
	}
	if !strings.Contains(para, "ABORTED") || !strings.Contains(para, "RESOURCE_EXHAUSTED") || strings.Contains(para, "UNAVAILABLE") {
		t.Errorf("Describe's StockReport paragraph should list ABORTED and RESOURCE_EXHAUSTED as retryable, not UNAVAILABLE:\n%s", para)
	}
	const method = "/example.inventory.v1.InventoryService/StockReport"
	for _, tc := range []struct {
		code codes.Code
		want int
	}{{codes.Aborted, 3}, {codes.ResourceExhausted, 3}, {codes.Unavailable, 1}} {
		fs.SetBehaviour(server.Fail(tc.code))
		before := fs.Calls(method)
		_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
		if status.Code(err) != tc.code {
			t.Errorf("StockReport against %v: %v", tc.code, err)
		}
		if got := fs.Calls(method) - before; got != tc.want {
			t.Errorf("StockReport against %v: the server saw %d attempts; Describe says:\n%s\nwant %d", tc.code, got, para, tc.want)
		}
	}
}
