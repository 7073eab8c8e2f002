package override_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

var inventoryServer = &inventoryv1.InventoryServiceServerPolicy

// TestServerOverridesShedding lowers the annotated limit of low-priority
// requests to 1 and sees the second report refused while the first runs.
func TestServerOverridesShedding(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    shedding: {pushback: 250ms}
    methods:
      ReserveStock:
        server: {dedup: {ttl: 1h, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}}
`), []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SHEDDING__LOW=1"}, inventory, payments)
	if err != nil {
		t.Fatal(err)
	}
	if opts := s.Options(inventory); len(opts) != 0 {
		t.Errorf("%d client options for server-side values", len(opts))
	}
	opts, err := s.ServerOptions(inventoryServer)
	if err != nil || len(opts) == 0 {
		t.Fatalf("ServerOptions: %v, %d options", err, len(opts))
	}
	g, err := server.NewGuard(opts...)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
		if c.Method == inventoryv1.InventoryService_StockReport_FullMethodName && c.N == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, g.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := client.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "north"})
		first <- err
	}()
	for srv.Calls(inventoryv1.InventoryService_StockReport_FullMethodName) == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err = client.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "south"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second report while one runs: %v, want RESOURCE_EXHAUSTED (low limit overridden to 1)", err)
	}
	if d, ok := runtime.Pushback(err, nil); !ok || d != 250*time.Millisecond {
		t.Errorf("pushback %v %v, want the overridden 250ms", d, ok)
	}
	// Orders are high priority: admitted while the report runs.
	if _, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "apple", Units: 1}); err != nil {
		t.Errorf("order while a report runs: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first report: %v", err)
	}
}

func TestServerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		want       string
	}{
		{"limits out of order", `{services: {example.inventory.v1.InventoryService: {shedding: {low: 40}}}}`, nil,
			`overrides.yaml: ` + inv + `.shedding.low: shedding.normal: 32 is below low (40): the limits are cumulative`},
		{"shedding on a method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {shedding: {low: 4}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.shedding: shedding limits the requests in flight of the whole service`},
		{"limit zero", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SHEDDING__HIGH=0"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SHEDDING__HIGH: must be at least 1, got 0`},
		{"bad code", `{services: {example.inventory.v1.InventoryService: {shedding: {code: INTERNAL}}}}`, nil,
			`overrides.yaml: ` + inv + `.shedding.code: must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "INTERNAL"`},
		{"bad store error mode", `{services: {example.inventory.v1.InventoryService: {methods: {ReserveStock: {server: {dedup: {on_store_error: IGNORE}}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.ReserveStock.server.dedup.on_store_error: must be one of ON_STORE_ERROR_REFUSE, ON_STORE_ERROR_RUN_WITHOUT_DEDUP, got "IGNORE"`},
		{"negative min deadline", `{services: {example.inventory.v1.InventoryService: {server: {min_deadline: -1ms}}}}`, nil,
			`overrides.yaml: ` + inv + `.server.min_deadline: must be positive, got -1ms`},
		{"lease too short", `{services: {example.inventory.v1.InventoryService: {methods: {ReserveStock: {server: {dedup: {lease: 2ns}}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.ReserveStock.server.dedup.lease: must be at least 100ms, got 2ns`},
		{"ttl too short", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SERVER__DEDUP__TTL=10ms"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SERVER__DEDUP__TTL: must be at least 1s, got 10ms`},
		{"priority is the contract", `{services: {example.inventory.v1.InventoryService: {methods: {StockReport: {priority: PRIORITY_HIGH}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.StockReport.priority: priority is part of the service's contract`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("overrides.yaml", []byte(tc.file), tc.env, inventory, payments)
			if err == nil {
				_, err = s.ServerOptions(inventoryServer)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant one containing:\n%s", err, tc.want)
			}
		})
	}
}

func TestServerDedupNeedsTheAnnotation(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {server: {dedup: {ttl: 1h}}}}}}}`), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ServerOptions(inventoryServer)
	if want := `overrides.yaml: ` + inv + `.methods.GetStock.server.dedup.ttl: the method does not deduplicate`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want %s", err, want)
	}
}
