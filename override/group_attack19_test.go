package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack19RefusedGroupIsOneProblem: a group the rules refuse where
// it is written (hedging or a cache on the service: they are decided
// method by method) is reported once, at the group's key. Its other
// values are not applied on their own behind the refusal: the check set
// aside only the first value of the group, so the next one was applied
// to the first method, and the loader added a second, false problem
// ("hedging.delay is required", of a file that sets it; "the method has
// no cache annotated", of a file that annotates one).
func TestAttack19RefusedGroupIsOneProblem(t *testing.T) {
	two := &policy.Service{Name: "t.S", Methods: []policy.Method{
		{Name: "/t.S/A", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second},
		{Name: "/t.S/B", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second},
	}}
	for _, tc := range []struct {
		name, file string
		env        []string
		want       []string // every line of the error, in order
	}{
		{"hedging on the service", `{services: {t.S: {hedging: {delay: 10ms, max_copies: 2}}}}`, nil,
			[]string{`o.yaml: services."t.S".hedging: hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method`}},
		{"hedging on the service, its values in the other order", `{services: {t.S: {hedging: {max_copies: 2, delay: 10ms}}}}`, nil,
			[]string{`o.yaml: services."t.S".hedging: hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method`}},
		{"a cache on the service", `{services: {t.S: {cache: {fresh_ttl: 10s, stale_ttl: 20s}}}}`, nil,
			[]string{`o.yaml: services."t.S".cache: a cache is keyed by the fields of one method's request: move it to the (resilient.v1.method) of each cached method`}},
		{"hedging on the service from variables", "", []string{"RESILIENT__T_S__HEDGING__DELAY=10ms", "RESILIENT__T_S__HEDGING__MAX_COPIES=2"},
			[]string{`RESILIENT__T_S__HEDGING: hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := override.Parse("o.yaml", []byte(tc.file), tc.env, two)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := err.Error(); got != strings.Join(tc.want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}
