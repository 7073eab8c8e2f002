package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25bChangesListTheValuesInForce: Describe's list is
// "annotated → in force", and its group lines write an adaptive limit's
// and a throttler's unset fields as the defaults the runtime uses. An
// edit or an override that added either listed those fields "none → 0"
// under a group line reading "min_limit 1, max_limit 8, …" and
// "k 2, window 5s, max_refusal 0.9": the list contradicted the policy
// printed above it. Each listed value must be the one on its group's
// line.
func TestAttack25bChangesListTheValuesInForce(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(svcYAML("    adaptive_limit: {tolerance: 2}\n    client_throttle: {k: 3}\n")), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]runtime.Option{
		"a program's edit": {runtime.WithPolicyFrom("edit", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{}
			p.ClientThrottle = &policy.Throttle{}
		})},
		"an override": s.Options(inventory),
	} {
		t.Run(name, func(t *testing.T) {
			rt, err := runtime.NewClient(inventory, opts...)
			if err != nil {
				t.Fatal(err)
			}
			describe := rt.Describe()
			lines := map[string]string{} // group → its line on the service
			for _, line := range strings.Split(describe, "\n") {
				if g, rest, ok := strings.Cut(strings.TrimPrefix(line, "  "), ": "); ok && !strings.HasPrefix(line, "   ") {
					lines[strings.TrimSuffix(g, " (shared)")] = ", " + rest + ","
				}
			}
			n := 0
			for _, ch := range rt.Changes() {
				group, field, _ := strings.Cut(ch.Key, ".")
				if group != "adaptive_limit" && group != "client_throttle" {
					continue
				}
				n++
				if want := ", " + field + " " + ch.Value + ","; !strings.Contains(lines[group], want) {
					t.Errorf("Changes: %s → %s, but the %s line reads %q", ch.Key, ch.Value, group, lines[group])
				}
			}
			if n != 9 {
				t.Errorf("%d changes of the two groups, want their 9 values:\n%s", n, describe)
			}
		})
	}
}
