package runtime_test

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// slowUnavailable answers UNAVAILABLE after d: a dependency that fails
// slowly, inside the attempt's timeout, with a code GetStock retries.
func slowUnavailable(d time.Duration) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		if err := server.Wait(ctx, d); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "slowly unavailable")
	}
}

// TestAttack20CachedMethodExportedBoundIsTheGoClients: the README's
// service-config table says the exported `timeout` of a method without
// overall_timeout is "the longest the policy lets a call run: attempts ×
// timeout + the bound of each backoff" (GetStock: 3 × 300 ms + 150 ms =
// 1.05 s), so that a caller in another language loading the file makes
// the calls the generated Go client makes. GetStock is cached, and the
// cache's shared call ran under "the method's own limit (overall_timeout,
// else timeout)": 300 ms for all its attempts. Against a dependency that
// answers UNAVAILABLE after 150 ms (200 ms left too little slack at load
// 16), the plain grpc-go channel, connected first, loading the
// checked-in file sends 3 attempts within its 1.05 s; the generated client
// (cache on, as annotated) sent 2 and gave up at 300 ms; without the
// cache it sends 3, as the file says. The shared call is now bounded by
// the exports' own bound (internal/bound), and sends 3.
func TestAttack20CachedMethodExportedBoundIsTheGoClients(t *testing.T) {
	sc, err := os.ReadFile("../example/gen/example/inventory/v1/inventory.service_config.json")
	if err != nil {
		t.Fatal(err)
	}
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	const answerAfter = 120 * time.Millisecond

	// The plain channel, with the checked-in service config.
	plainSrv, _ := startFault(t, slowUnavailable(answerAfter))
	pc, err := grpc.NewClient("passthrough:///"+plainSrv.Addr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(string(sc)))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	readyConn(t, pc)
	if _, err := inventoryv1.NewInventoryServiceClient(pc).GetStock(context.Background(), req); status.Code(err) != codes.Unavailable {
		t.Fatalf("plain channel: %v, want UNAVAILABLE", err)
	}
	want := plainSrv.Calls(getStock)

	// The generated client without its cache: the control.
	uncachedSrv, ucc := startFault(t, slowUnavailable(answerAfter))
	readyConn(t, ucc)
	if _, err := getStockOf(context.Background(), invClient(t, ucc, nil, nil)); status.Code(err) != codes.Unavailable {
		t.Fatalf("generated client without cache: %v, want UNAVAILABLE", err)
	}
	if got := uncachedSrv.Calls(getStock); got != want {
		t.Fatalf("control: the generated client without its cache sent %d attempts, the plain channel %d", got, want)
	}

	// The generated client as annotated (its cache kept; the rate limit
	// and the breaker, which do not act on one call, taken out).
	cachedSrv, ccc := startFault(t, slowUnavailable(answerAfter))
	readyConn(t, ccc)
	c, err := inventoryv1.NewInventoryServiceResilientClient(ccc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) { p.RateLimit, p.Breaker = nil, nil })}})
	if err != nil {
		t.Fatal(err)
	}
	took, err := getStockOf(context.Background(), c)
	if got := cachedSrv.Calls(getStock); got != want {
		t.Errorf("the generated client (cached GetStock) sent %d attempts in %v (%v); a caller loading the exported service config sends %d: the file does not describe the Go client's policy", got, took, err, want)
	}
}
