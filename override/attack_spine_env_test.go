package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// A number that is not finite, written in a variable (strconv reads
// "NaN", "Inf", "infinity" and "1e999" as floats), is refused as in the
// file, for every float field an override can set; none reaches NewClient.
func TestAttackSpineEnvNonFiniteRefused(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	for _, field := range []string{
		"RETRY_BUDGET__RATIO", "CIRCUIT_BREAKER__FAILURE_RATIO", "RATE_LIMIT__REQUESTS_PER_SECOND",
		"ADAPTIVE_LIMIT__TOLERANCE", "ADAPTIVE_LIMIT__SMOOTHING", "CLIENT_THROTTLE__K", "CLIENT_THROTTLE__MAX_REFUSAL",
		"METHODS__GETSTOCK__RETRY__BACKOFF_MULTIPLIER",
	} {
		for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1e999"} {
			env := svc + field + "=" + v
			s, err := override.Parse("", nil, []string{env}, inventory)
			if err == nil {
				t.Errorf("%s accepted; changes %+v", env, build(t, s).Changes())
				continue
			}
			if !strings.Contains(err.Error(), svc+field) {
				t.Errorf("%s: the refusal does not name the variable: %v", env, err)
			}
		}
	}
}

// One set's options build several clients at once (a program with a
// client per region): no data race, and each gets the same policy.
func TestAttackSpineOneSetManyClientsAtOnce(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    timeout: 250ms
    rate_limit: {requests_per_second: 200}
    methods:
      GetStock: {retry: {max_attempts: 2}, circuit_breaker: {per_method: true, cool_down: 3s}}
`), []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__CACHE__MAX_ENTRIES=7"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	opts := s.Options(inventory)
	out := make(chan string, 4)
	for range 4 {
		go func() {
			rt, err := runtime.NewClient(inventory, opts...)
			if err != nil {
				out <- err.Error()
				return
			}
			out <- rt.Describe()
		}()
	}
	first := <-out
	for range 3 {
		if d := <-out; d != first {
			t.Errorf("two clients built from one set differ:\n%s\n%s", first, d)
		}
	}
	if !strings.Contains(first, "retry: max_attempts 2,") || !strings.Contains(first, "max_entries 7,") {
		t.Errorf("the overrides are not in force:\n%s", first)
	}
}
