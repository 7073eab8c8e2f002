package runtime_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-resilient/resilient/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A refusal of the runtime is a gRPC status error that also matches its
// sentinel.
func ExampleError() {
	var err error = &runtime.Error{
		Code:       codes.Unavailable,
		Dependency: "example.inventory.v1.InventoryService",
		Method:     "/example.inventory.v1.InventoryService/GetItem",
		Reason:     runtime.ErrCircuitOpen,
		RetryAfter: 3 * time.Second,
		Detail:     "circuit breaker open towards example.inventory.v1.InventoryService",
	}
	fmt.Println(status.Code(err))
	fmt.Println(errors.Is(err, runtime.ErrCircuitOpen), errors.Is(err, runtime.ErrBulkheadFull))
	fmt.Println(err)
	// Output:
	// Unavailable
	// true false
	// resilient: circuit breaker open towards example.inventory.v1.InventoryService (/example.inventory.v1.InventoryService/GetItem); retry in 3s
}
