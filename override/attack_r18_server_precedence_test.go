package override_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// downStore is an idempotency store that cannot be reached.
type downStore struct{}

var errDown = errors.New("store down")

func (downStore) Claim(context.Context, string, string, rserver.Fingerprint, time.Duration) (rserver.Claim, error) {
	return rserver.Claim{}, errDown
}
func (downStore) Renew(context.Context, string, string, time.Duration) error { return errDown }
func (downStore) Complete(context.Context, string, string, []byte, time.Duration) error {
	return errDown
}
func (downStore) Release(context.Context, string, string) error { return errDown }

// TestAttackR18ServerOverridePrecedence: the rows of the README's
// precedence table hold for the server-side values as for the clients':
// source first, then level. on_store_error is the value whose mistake
// costs most (a charge run twice, or a service refusing everything), and
// its effect is seen from outside: with the store down, ReserveStock under
// REFUSE answers UNAVAILABLE without running, under RUN_WITHOUT_DEDUP it
// runs. The annotation says REFUSE.
func TestAttackR18ServerOverridePrecedence(t *testing.T) {
	const (
		refuse = "ON_STORE_ERROR_REFUSE"
		run    = "ON_STORE_ERROR_RUN_WITHOUT_DEDUP"
		envSvc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SERVER__DEDUP__ON_STORE_ERROR="
		envM   = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__RESERVESTOCK__SERVER__DEDUP__ON_STORE_ERROR="
	)
	fileSvc := func(v string) string {
		return "services:\n  example.inventory.v1.InventoryService:\n    server: {dedup: {on_store_error: " + v + "}}\n"
	}
	fileM := func(v string) string {
		return "    methods:\n      ReserveStock: {server: {dedup: {on_store_error: " + v + "}}}\n"
	}
	for _, tc := range []struct {
		name string
		file string
		env  []string
		runs bool
	}{
		{"annotation only", "", nil, false},
		{"file service over annotation", fileSvc(run), nil, true},
		{"file method over file service", fileSvc(run) + fileM(refuse), nil, false},
		{"env service over file method", fileSvc(refuse) + fileM(refuse), []string{envSvc + run}, true},
		{"env method over env service", "", []string{envSvc + run, envM + refuse}, false},
		{"env method over everything", fileSvc(refuse) + fileM(refuse), []string{envSvc + refuse, envM + run}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("overrides.yaml", []byte(tc.file), tc.env, inventory, payments)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := s.ServerOptions(inventoryServer)
			if err != nil {
				t.Fatal(err)
			}
			g, err := server.NewGuard(append(opts, rserver.WithStore(downStore{}))...)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.Start("127.0.0.1:0", server.Healthy, g.ServerOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, "o-1")
			_, err = inventoryv1.NewInventoryServiceClient(cc).ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "apple", Units: 1})
			ran := srv.Calls(inventoryv1.InventoryService_ReserveStock_FullMethodName) == 1
			if ran != tc.runs || (tc.runs && err != nil) || (!tc.runs && status.Code(err) != codes.Unavailable) {
				t.Errorf("with the store down: ran %v, %v; want ran %v (%s)", ran, err, tc.runs, map[bool]string{true: run, false: refuse + ": UNAVAILABLE"}[tc.runs])
			}
		})
	}
}
