package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Promises of the README's Overrides section that no other test held to.

// "client_throttle is the service's only: set on a method, it is
// refused", from the file and from a variable alike, naming the key.
func TestAttackReadmeClientThrottleOnAMethodIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  []string
		key  string
	}{
		"file": {svcYAML("    methods:\n      GetStock: {client_throttle: {k: 3}}\n"), nil,
			"o.yaml: " + inv + ".methods.GetStock.client_throttle: "},
		"variable": {"", []string{invEnv + "__METHODS__GETSTOCK__CLIENT_THROTTLE__K=3"},
			invEnv + "__METHODS__GETSTOCK__CLIENT_THROTTLE: "},
	} {
		t.Run(name, func(t *testing.T) {
			err := refused(t, tc.file, tc.env...)
			if !strings.HasPrefix(err, tc.key) || !strings.Contains(err, "set it on the service") || strings.Count(err, "\n") != 0 {
				t.Errorf("err = %q, want one problem at %s saying to set it on the service", err, tc.key)
			}
		})
	}
}

// "A value set back to the annotation's is not a change": an override
// that writes the annotated value, and a variable that puts back the
// value a file key moved, leave nothing in Changes for it.
func TestAttackReadmeValueSetBackIsNoChange(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  []string
	}{
		"file writes the annotated value": {svcYAML("    methods:\n      GetStock: {timeout: 300ms}\n"), nil},
		"variable puts it back":           {svcYAML("    methods:\n      GetStock: {timeout: 100ms}\n"), []string{invEnv + "__METHODS__GETSTOCK__TIMEOUT=300ms"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := override.Parse("o.yaml", []byte(tc.file), tc.env, inventory)
			if err != nil {
				t.Fatal(err)
			}
			rt := build(t, s)
			if ch, ok := changesByKey(rt)["methods.GetStock.timeout"]; ok {
				t.Errorf("listed as a change: %+v", ch)
			}
			if got := rt.Policy().Methods[0].Timeout; got != 300*time.Millisecond {
				t.Errorf("GetStock's timeout in force %s, want the annotated 300ms", got)
			}
		})
	}
}

// The three problems the README shows are, word for word, what the
// loader reports for them, each on its line.
func TestAttackReadmeRefusalLinesAreTheLoaders(t *testing.T) {
	_, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {retry: {max_attempts: 0}}
  example.payments.v1.PaymentsService:
    methods:
      Charge: {retry: {max_attempts: 3}}
`), []string{invEnv + "__RETRY__ATTEMPTS=2"}, inventory, payments)
	if err == nil {
		t.Fatal("accepted")
	}
	got := strings.Split(err.Error(), "\n")
	for _, want := range []string{
		`overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.retry.max_attempts: must be at least 1, got 0 (it counts the first attempt, and 1 means no retry); remove this override to keep the annotated value`,
		`overrides.yaml: services."example.payments.v1.PaymentsService".methods.Charge.retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)`,
		`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__ATTEMPTS: unknown field; the fields are those of the annotation: max_attempts, initial_backoff, max_backoff, backoff_multiplier, retryable_codes`,
	} {
		found := false
		for _, line := range got {
			found = found || line == want
		}
		if !found {
			t.Errorf("no line\n  %s\nin\n  %s", want, strings.Join(got, "\n  "))
		}
	}
	if len(got) != 3 {
		t.Errorf("%d problems, want the 3 shown:\n%v", len(got), err)
	}
}

// A variable spelled exactly for one service is read for it, also when
// another service's name, with its underscores taken away, reads the
// same (pkg.AB and pkg.A_B): the lenient respelling that helps a
// misspelt name must not turn away a right one, whatever the order the
// services are met in.
func TestAttackReadmeExactVariableBeatsAnotherServicesRespelling(t *testing.T) {
	method := func(svc string) policy.Method {
		return policy.Method{Name: "/" + svc + "/Get", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second}
	}
	ab := &policy.Service{Name: "pkg.AB", Methods: []policy.Method{method("pkg.AB")}}
	aUB := &policy.Service{Name: "pkg.A_B", Methods: []policy.Method{method("pkg.A_B")}}
	for _, tc := range []struct {
		kv   string
		want *policy.Service
	}{
		{"RESILIENT__PKG_AB__TIMEOUT=2s", ab},
		{"RESILIENT__PKG_A_B__TIMEOUT=2s", aUB},
	} {
		for range 20 { // the map's order changes from run to run
			s, err := override.Parse("", nil, []string{tc.kv}, ab, aUB)
			if err != nil {
				t.Fatalf("%s refused: %v", tc.kv, err)
			}
			if opts := s.Options(tc.want); len(opts) != 1 {
				t.Fatalf("%s: %d options for %s, want 1 (keys %v)", tc.kv, len(opts), tc.want.Name, s.Keys())
			}
		}
	}
	// Misspelt in case only, the name it must have is the one it reads
	// as, not the other service's.
	for range 20 {
		_, err := override.Parse("", nil, []string{"resilient__pkg_ab__timeout=2s"}, ab, aUB)
		if err == nil || !strings.Contains(err.Error(), "must be named RESILIENT__PKG_AB__TIMEOUT ") {
			t.Fatalf("resilient__pkg_ab__timeout: err = %v, want it told to be RESILIENT__PKG_AB__TIMEOUT", err)
		}
	}
}
