package override_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// TestAttack25bOneSetBuildsClientsAtOnce: a program loads its overrides
// once and may build its clients from several goroutines. The options of
// one Set, applied by 8 clients at once, share nothing the race detector
// sees, and every client ends with the same policy and the same record,
// with groups added (StockReport's retry) or copied (a per_method
// breaker, after the service's cool_down) and values the annotation
// chose that stay when what they could follow moves (a burst of 100
// under a new rate, a stale_ttl of 5m under a new fresh_ttl).
func TestAttack25bOneSetBuildsClientsAtOnce(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(svcYAML(`    retry: {max_attempts: 2}
    rate_limit: {requests_per_second: 40}
    retry_budget: {ratio: 0.3}
    circuit_breaker: {cool_down: 4s}
    methods:
      GetStock: {cache: {fresh_ttl: 2s}, circuit_breaker: {per_method: true, failure_ratio: 0.4}}
      WatchStock: {bulkhead: {permits: 3}}
`)), []string{invEnv + "__METHODS__STOCKREPORT__TIMEOUT=120ms"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	opts := s.Options(inventory)
	const n = 8
	var wg sync.WaitGroup
	describes := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, err := runtime.NewClient(inventory, opts...)
			if err != nil {
				errs[i] = err
				return
			}
			describes[i] = rt.Describe() + fmt.Sprint(rt.Changes())
		}()
	}
	wg.Wait()
	want, err := runtime.NewClient(inventory, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("client %d: %v", i, errs[i])
		} else if got := describes[i]; got != want.Describe()+fmt.Sprint(want.Changes()) {
			t.Errorf("client %d differs from one built alone:\n%s", i, got)
		}
	}
	p := want.Policy()
	if p.RateLimit.RequestsPerSecond != 40 || p.RateLimit.Burst != 100 || p.Methods[0].Cache.FreshTTL != 2e9 || p.Methods[0].Cache.StaleTTL != inventory.Methods[0].Cache.StaleTTL || p.Methods[0].Breaker == nil ||
		p.Methods[0].Breaker.CoolDown != 4e9 || p.Methods[0].Breaker.FailureRatio != 0.4 || p.Methods[3].Retry == nil || p.Methods[3].Retry.MaxAttempts != 2 {
		t.Errorf("in force: rate %+v, GetStock %+v %+v, StockReport retry %+v", p.RateLimit, p.Methods[0].Cache, p.Methods[0].Breaker, p.Methods[3].Retry)
	}
}
