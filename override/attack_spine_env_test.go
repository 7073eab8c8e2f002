package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
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
