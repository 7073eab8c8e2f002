package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// TestAttack26DEnvFieldSpelledWithUnicodeIsNotTheField: a variable's name
// is read as written when it is spelled right, and one "not spelled so …
// is refused with the name it must have, never ignored"; an environment
// that holds one value twice with two values is refused, "neither is
// chosen" (Overrides). The field part of a name was lower-cased with
// Unicode's rules, under which "İ" (U+0130) is "i" and the Kelvin sign
// "K" (U+212A) is "k", and the name is already upper case: so
// …__TİMEOUT was read as timeout and …__RETRY__MAX_BACKOFF spelled with a
// Kelvin sign as max_backoff, two more names for one value. Set beside
// the proper name with another value, the one later in the environment
// won, silently: the timeout in force was 2s in one order and 1s in the
// other.
func TestAttack26DEnvFieldSpelledWithUnicodeIsNotTheField(t *testing.T) {
	const svc = "example.inventory.v1.InventoryService"
	odd := []string{
		invEnv + "__T\u0130MEOUT",                               // TİMEOUT
		invEnv + "__METHODS__GETSTOCK__RETRY__MAX_BAC\u212aOFF", // MAX_BACKOFF with a Kelvin sign
	}
	proper := []string{override.EnvName(svc, "", "timeout"), override.EnvName(svc, "GetStock", "retry.max_backoff")}
	for i, name := range odd {
		if _, err := override.Parse("", nil, []string{name + "=500ms"}, inventory); err == nil || !strings.HasPrefix(err.Error(), name) {
			t.Errorf("%+q is not the name EnvName spells (%+q), yet it was read as that value: got %v", name, proper[i], err)
		}
	}
	// The proper name and the odd one, each order.
	inForce := func(env ...string) (time.Duration, error) {
		s, err := override.Parse("", nil, env, inventory)
		if err != nil {
			return 0, err
		}
		c, err := runtime.NewClient(inventory, s.Options(inventory)...)
		if err != nil {
			return 0, err
		}
		return c.Policy().Methods[0].Timeout, nil
	}
	a, errA := inForce(invEnv+"__TIMEOUT=1s", odd[0]+"=2s")
	b, errB := inForce(odd[0]+"=2s", invEnv+"__TIMEOUT=1s")
	if errA == nil || errB == nil {
		t.Errorf("%+q=1s beside %+q=2s, two names for one value: accepted, the timeout in force %v in one order and %v in the other (errors %v, %v)", invEnv+"__TIMEOUT", odd[0], a, b, errA, errB)
	}
}
