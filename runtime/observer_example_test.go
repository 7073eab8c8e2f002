package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// unavailable is a call to a dependency that is down.
func unavailable(context.Context, *inventoryv1.GetStockRequest, ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

// examplePolicy is a dependency with a breaker that opens after two
// failures.
var examplePolicy = policy.Service{
	Name: "example.inventory.v1.InventoryService",
	Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, CoolDown: time.Minute,
		HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)},
	Methods: []policy.Method{{Name: "/example.inventory.v1.InventoryService/GetStock", Idempotent: true}},
}

// An observer receives the runtime's decisions as events, once each: here
// five calls to a dependency that is down open the breaker once, and the
// fallback that answers them is reported once per cause, not once per call.
// Forward them to OpenTelemetry (a span event, a log record) the same way.
func ExampleWithObserver() {
	observer := func(e runtime.Event) {
		switch e.Kind {
		case runtime.EventBreakerTransition:
			fmt.Printf("%s: %s → %s (%s)\n", e.Kind, e.From, e.To, e.Cause)
		default:
			fmt.Printf("%s %s: %s\n", e.Kind, e.Method, e.Cause)
		}
	}
	rt, err := runtime.NewClient(&examplePolicy, runtime.WithObserver(observer))
	if err != nil {
		panic(err)
	}
	stale := func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	getStock, err := runtime.NewUnary(rt, examplePolicy.Methods[0].Name, unavailable,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{Fallback: stale})
	if err != nil {
		panic(err)
	}
	for range 5 {
		getStock.Call(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}) //nolint:errcheck
	}
	// Output:
	// fallback /example.inventory.v1.InventoryService/GetStock: unavailable
	// breaker transition: closed → open (failure ratio reached over the window)
	// fallback /example.inventory.v1.InventoryService/GetStock: circuit_open
}

// With a Registerer, the client counts its attempts, retries, refusals and
// fallbacks, and exposes its breaker's state.
func ExampleWithRegisterer() {
	reg := prometheus.NewRegistry()
	rt, err := runtime.NewClient(&examplePolicy, runtime.WithRegisterer(reg))
	if err != nil {
		panic(err)
	}
	getStock, err := runtime.NewUnary(rt, examplePolicy.Methods[0].Name, unavailable,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		panic(err)
	}
	for range 5 {
		getStock.Call(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}) //nolint:errcheck
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP resilient_client_breaker_rejections_total Calls refused by the circuit breaker without reaching the dependency.
# TYPE resilient_client_breaker_rejections_total counter
resilient_client_breaker_rejections_total{dependency="example.inventory.v1.InventoryService",method="GetStock"} 3
# HELP resilient_client_breaker_state State of the circuit breaker as of its last transition: 0 closed, 1 half-open, 2 open.
# TYPE resilient_client_breaker_state gauge
resilient_client_breaker_state{breaker="shared",dependency="example.inventory.v1.InventoryService"} 2
`), "resilient_client_breaker_rejections_total", "resilient_client_breaker_state")
	fmt.Println(err)
	// Output:
	// <nil>
}

// Client.Describe prints the policy in force and, for every value an edit
// changed, the annotated value and where the new one came from.
func ExampleClient_Describe() {
	rt, err := runtime.NewClient(&examplePolicy,
		runtime.WithPolicyFrom("ops.yaml: services.\"example.inventory.v1.InventoryService\".methods.GetStock.timeout",
			func(p *policy.Service) { p.Methods[0].Timeout = 200 * time.Millisecond }),
		runtime.WithPolicy(func(p *policy.Service) { p.Breaker.CoolDown = 5 * time.Second }))
	if err != nil {
		panic(err)
	}
	fmt.Print(rt.Describe())
	for _, c := range rt.Changes() {
		fmt.Printf("%s was %s\n", c.Key, c.Annotated)
	}
	// Output:
	// example.inventory.v1.InventoryService
	//   circuit_breaker (shared): failure_ratio 0.5, minimum_calls 2, window 1m0s, cool_down 5s, half_open_probes 1, slow_call_threshold none, failure_codes [UNAVAILABLE]
	//   bulkhead: none
	//   /example.inventory.v1.InventoryService/GetStock
	//     unary, idempotent: true, idempotency_key: none, timeout: 200ms, overall_timeout: none
	//     retry: none
	//     circuit_breaker: shared
	//     bulkhead: none
	//     rate_limit: none
	//     adaptive_limit: none
	//   changed from the annotation (annotated → in force, from):
	//     methods.GetStock.timeout: none → 200ms (ops.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.timeout)
	//     circuit_breaker.cool_down: 1m0s → 5s (WithPolicy)
	// methods.GetStock.timeout was none
	// circuit_breaker.cool_down was 1m0s
}
