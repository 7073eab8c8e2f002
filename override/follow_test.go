package override_test

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// A value whose default follows another (a burst its rate, a stale_ttl
// its fresh_ttl) moves with it under an override, as it would in the
// .proto; one the annotation chose, or an override sets, stays.
func TestFollowingDefaultsMoveWithTheirValue(t *testing.T) {
	p := &policy.Service{
		Name:      "t.v1.S",
		RateLimit: &policy.RateLimit{RequestsPerSecond: 200, Burst: 200},
		Methods: []policy.Method{
			{Name: "/t.v1.S/Get", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second,
				Cache:     &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10, KeyFields: []string{"id"}},
				RateLimit: &policy.RateLimit{RequestsPerSecond: 10, Burst: 3}},
			{Name: "/t.v1.S/List", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second,
				Cache: &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"id"}}},
		},
	}
	for _, tc := range []struct {
		name, file string
		check      func(*policy.Service) bool
	}{
		{"rate with its default burst", `{rate_limit: {requests_per_second: 1000.5}}`,
			func(q *policy.Service) bool { return q.RateLimit.Burst == 1001 }},
		{"rate and burst", `{rate_limit: {requests_per_second: 1000, burst: 7}}`,
			func(q *policy.Service) bool { return q.RateLimit.Burst == 7 }},
		{"rate with a chosen burst", `{methods: {Get: {rate_limit: {requests_per_second: 50}}}}`,
			func(q *policy.Service) bool { return q.Methods[0].RateLimit.Burst == 3 }},
		{"fresh_ttl without stale answers", `{methods: {Get: {cache: {fresh_ttl: 10s}}}}`,
			func(q *policy.Service) bool { return q.Methods[0].Cache.StaleTTL == 10*time.Second }},
		{"fresh_ttl and stale_ttl", `{methods: {Get: {cache: {fresh_ttl: 10s, stale_ttl: 20s}}}}`,
			func(q *policy.Service) bool { return q.Methods[0].Cache.StaleTTL == 20*time.Second }},
		{"fresh_ttl with stale answers", `{methods: {List: {cache: {fresh_ttl: 10s}}}}`,
			func(q *policy.Service) bool { return q.Methods[1].Cache.StaleTTL == time.Minute }},
	} {
		s, err := override.Parse("o.yaml", []byte("services: {t.v1.S: "+tc.file+"}"), nil, p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		rt, err := runtime.NewClient(p, s.Options(p)...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if q := rt.Policy(); !tc.check(q) {
			t.Errorf("%s: rate limit %+v, Get's %+v and cache %+v, List's cache %+v", tc.name, *q.RateLimit, *q.Methods[0].RateLimit, *q.Methods[0].Cache, *q.Methods[1].Cache)
		}
	}
}
