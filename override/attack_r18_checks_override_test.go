package override_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// The attacks of round 18 on the rebuilt checks, at the override loader:
// it runs rules.Check, the plugin's check of one annotation, on each
// level of the file, then the runtime's own on the policy in force.

// r18Value is one value as an override file writes it and as a .proto
// option does.
type r18Value struct{ yaml, text string }

// r18Leaf writes path = v as nested flow mappings (YAML) or braces
// (text format).
func r18Leaf(path, v string, yaml bool) string {
	parts := strings.Split(path, ".")
	s := parts[len(parts)-1] + ": " + v
	for i := len(parts) - 2; i >= 0; i-- {
		if yaml {
			s = parts[i] + ": {" + s + "}"
		} else {
			s = parts[i] + " {" + s + "}"
		}
	}
	return s
}

// TestAttackR18ChecksOverrideNeverLooserThanCheck: for every value of a
// grid of extremes (0, negative, NaN, ±Inf, 2^32-1, durations of 1ns or
// 292 years, unknown and misplaced codes and enums) of every field, set at
// the service and on GetStock, what rules.Check refuses in an annotation
// of that level the loader refuses too, naming the key; and what the
// loader accepts, NewClient builds, Validate passes and, for the server
// keys, ServerOptions and NewGuard take (or ServerOptions refuses naming
// the key). Nothing panics.
func TestAttackR18ChecksOverrideNeverLooserThanCheck(t *testing.T) {
	durations := []r18Value{{"0s", "{seconds: 0}"}, {"-1s", "{seconds: -1}"}, {"1ns", "{nanos: 1}"}, {"9ns", "{nanos: 9}"},
		{"99ms", "{nanos: 99000000}"}, {"1s", "{seconds: 1}"}, {"24h", "{seconds: 86400}"}, {"2562047h", "{seconds: 9223369200}"}}
	counts := []r18Value{{"0", "0"}, {"1", "1"}, {"2", "2"}, {"20", "20"}, {"1048577", "1048577"}, {"2097153", "2097153"}, {"4294967295", "4294967295"}}
	numbers := []r18Value{{"0", "0"}, {"-1", "-1"}, {"0.5", "0.5"}, {"1", "1"}, {"1.5", "1.5"}, {".nan", "nan"}, {".inf", "inf"}, {"-.inf", "-inf"}, {"1e308", "1e308"}}
	codes := []r18Value{{"[OK]", `["OK"]`}, {"[BOGUS]", `["BOGUS"]`}, {"[NOT_FOUND]", `["NOT_FOUND"]`}, {"[unavailable]", `["unavailable"]`},
		{"[DEADLINE_EXCEEDED]", `["DEADLINE_EXCEEDED"]`}, {"[UNAVAILABLE, UNAVAILABLE]", `["UNAVAILABLE", "UNAVAILABLE"]`}}
	fields := map[string][]r18Value{
		"timeout": durations, "overall_timeout": durations,
		"retry.max_attempts": counts, "retry.initial_backoff": durations, "retry.max_backoff": durations, "retry.backoff_multiplier": numbers, "retry.retryable_codes": codes,
		"retry_budget.ratio": numbers, "retry_budget.min_retries": counts, "retry_budget.window": durations,
		"circuit_breaker.failure_ratio": numbers, "circuit_breaker.minimum_calls": counts, "circuit_breaker.window": durations, "circuit_breaker.window_calls": counts,
		"circuit_breaker.cool_down": durations, "circuit_breaker.half_open_probes": counts, "circuit_breaker.slow_call_threshold": durations, "circuit_breaker.failure_codes": codes,
		"bulkhead.permits": counts, "bulkhead.max_wait": durations,
		"rate_limit.requests_per_second": numbers, "rate_limit.burst": counts, "rate_limit.max_wait": durations,
		"adaptive_limit.min_limit": counts, "adaptive_limit.max_limit": counts, "adaptive_limit.initial_limit": counts,
		"adaptive_limit.tolerance": numbers, "adaptive_limit.smoothing": numbers, "adaptive_limit.baseline_window": durations,
		"client_throttle.k": numbers, "client_throttle.window": durations, "client_throttle.max_refusal": numbers,
		"server.min_deadline": durations, "server.default_timeout": durations, "server.dedup.ttl": durations, "server.dedup.lease": durations,
		"server.dedup.on_store_error": {{"ON_STORE_ERROR_REFUSE", "ON_STORE_ERROR_REFUSE"}, {"7", "7"}},
		"shedding.low":                counts, "shedding.critical": counts, "shedding.pushback": durations,
		"shedding.code": {{"OK", `"OK"`}, {"BOGUS", `"BOGUS"`}, {"NOT_FOUND", `"NOT_FOUND"`}, {"RESOURCE_EXHAUSTED", `"RESOURCE_EXHAUSTED"`}},
		"hedging.delay": durations, "hedging.max_copies": counts, "hedging.non_fatal_codes": codes,
		"cache.fresh_ttl": durations, "cache.stale_ttl": durations, "cache.max_entries": counts,
	}
	const svc = `o.yaml: services."example.inventory.v1.InventoryService".`
	tried, refusedByCheck := 0, 0
	for path, values := range fields {
		for _, v := range values {
			for _, method := range []string{"", "GetStock"} {
				p := &resilientv1.Policy{}
				if err := prototext.Unmarshal([]byte(r18Leaf(path, v.text, false)), p); err != nil {
					t.Fatalf("%s = %s: %v", path, v.text, err)
				}
				var refusals []string
				rules.Check(p, method != "", func(at, format string, args ...any) {
					refusals = append(refusals, at+": "+fmt.Sprintf(format, args...))
				})
				body := "services:\n  example.inventory.v1.InventoryService:\n"
				key := svc
				if method != "" {
					body += "    methods:\n      " + method + ":\n    "
					key += "methods." + method + "."
				}
				body += "    " + r18Leaf(path, v.yaml, true) + "\n"
				tried++
				var set *override.Set
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panicked: %v", r)
						}
					}()
					set, err = override.Parse("o.yaml", []byte(body), nil, inventory)
				}()
				if err != nil && strings.Contains(err.Error(), "panicked") {
					t.Fatalf("%s: %v", body, err)
				}
				if len(refusals) > 0 {
					refusedByCheck++
					if err == nil {
						t.Errorf("the plugin refuses %s = %s (%s), the loader accepts it:\n%s", path, v.text, strings.Join(refusals, "; "), body)
						continue
					}
					at, _, _ := strings.Cut(refusals[0], ": ")
					if !strings.Contains(err.Error(), key+strings.SplitN(at, "[", 2)[0]) {
						t.Errorf("%s: the plugin refuses %s, the loader does not name its key %s%s:\n%v", body, refusals[0], key, at, err)
					}
					continue
				}
				if err != nil {
					if !strings.Contains(err.Error(), "o.yaml: ") {
						t.Errorf("%s: refused without naming the key: %v", body, err)
					}
					continue
				}
				acceptedBuilds(t, set, body)
			}
		}
	}
	if refusedByCheck == 0 || refusedByCheck == tried {
		t.Fatalf("%d of %d values refused by rules.Check: the grid is not one", refusedByCheck, tried)
	}
}

// TestAttackR18ChecksOverrideHostileFiles: files an operator or an
// attacker may hand the loader (aliases that blow up, wrong shapes,
// nulls, huge and odd numbers, tags, several documents) are refused with
// the file named, or accepted and built; never a panic.
func TestAttackR18ChecksOverrideHostileFiles(t *testing.T) {
	const s = "services:\n  example.inventory.v1.InventoryService:\n"
	laughs := "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nservices: *e\n"
	for _, body := range []string{
		laughs,
		s + "    timeout: null\n",
		s + "    retry: null\n",
		s + "    methods: null\n",
		s + "    methods:\n      GetStock: null\n",
		s + "    methods:\n      GetStock: [1, 2]\n",
		s + "    retry: [max_attempts, 3]\n",
		s + "    retry: {max_attempts: [3]}\n",
		s + "    retry: {max_attempts: {x: 1}}\n",
		s + "    retry: {retryable_codes: {UNAVAILABLE: 1}}\n",
		s + "    retry: {retryable_codes: [[UNAVAILABLE]]}\n",
		s + "    retry: {retryable_codes: [null]}\n",
		s + "    retry: {max_attempts: 0x10}\n",
		s + "    retry: {max_attempts: 1_000}\n",
		s + "    retry: {max_attempts: 3.0}\n",
		s + "    retry: {max_attempts: 1e3}\n",
		s + "    retry: {max_attempts: -0}\n",
		s + "    retry: {max_attempts: 99999999999999999999999999999}\n",
		s + "    retry: {max_attempts: !!binary AAAA}\n",
		s + "    retry: {max_attempts: \"3\"}\n",
		s + "    retry: {max_attempts: true}\n",
		s + "    timeout: 1e400s\n",
		s + "    timeout: 9223372036.854775807s\n",
		s + "    timeout: 2562047h47m16.854775807s\n",
		s + "    timeout: 2562047h47m16.854775808s\n",
		s + "    timeout: -9223372036854775808ns\n",
		s + "    timeout: 1s1s\n",
		s + "    timeout: 1µs\n",
		s + "    timeout: \"\"\n",
		s + "    timeout: .inf\n",
		s + "    circuit_breaker: {failure_ratio: 1e-400}\n",
		s + "    circuit_breaker: {failure_ratio: 0x1p-2}\n",
		s + "    circuit_breaker: {per_method: 1}\n",
		s + "    <<: {timeout: 1s}\n",
		s + "    ? [a, b]\n    : 1\n",
		s + "    timeout: 1s\n---\nservices: {}\n",
		s + "    \"retry.max_attempts\": 2\n",
		s + "    retry.max_attempts: 2\n",
		s + "    RETRY: {MAX_ATTEMPTS: 2}\n",
		s + "    methods:\n      getstock: {timeout: 1s}\n",
		s + "    methods:\n      \"\": {timeout: 1s}\n",
		s + "    methods:\n      GetStock:\n        methods: {GetStock: {timeout: 1s}}\n",
		s + "    shedding: {low: 1, normal: 0, high: 4294967296, critical: -1}\n",
		s + "    server: {dedup: {ttl: 1h, on_store_error: 1.5}}\n",
		s + "    server: {dedup: {on_store_error: null}}\n",
		"services:\n  " + strings.Repeat("x", 1<<16) + ": {timeout: 1s}\n",
		"services: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n",
		"\x00\x01\x02\xff",
		"\t" + s,
		"services:\n  example.inventory.v1.InventoryService: &x\n    methods:\n      GetStock: *x\n",
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked: %v", r)
				}
			}()
			var set *override.Set
			set, err = override.Parse("o.yaml", []byte(body), nil, inventory)
			if err == nil {
				p := inventory.Clone()
				if _, e := runtime.NewClient(&p, set.Options(&p)...); e != nil {
					err = fmt.Errorf("accepted, then refused by NewClient: %w", e)
				}
			}
		}()
		short := body
		if len(short) > 200 {
			short = short[:200] + "…"
		}
		if err != nil && (strings.Contains(err.Error(), "panicked") || strings.Contains(err.Error(), "NewClient") || !strings.Contains(err.Error(), "o.yaml")) {
			t.Errorf("%q: %v", short, err)
		}
	}
}

// TestAttackR18ChecksOverrideSpeaksOptions: a problem the runtime finds
// in the policy in force once an override is applied is told in the words
// of the override file, at the key the operator wrote. Two were told in
// Go's words: a count window below the breaker's minimum_calls named
// Breaker.MinimumCalls and no key of the file, and a max_limit above the
// bulkhead's permits advised "leave it 0 for the ceiling", a value the
// file refuses (max_limit: 0 is "must be at least 1").
func TestAttackR18ChecksOverrideSpeaksOptions(t *testing.T) {
	for _, tc := range []struct{ body, key string }{
		{"    circuit_breaker: {window_calls: 10}\n", `o.yaml: services."example.inventory.v1.InventoryService".circuit_breaker.window_calls: `},
		{"    adaptive_limit: {max_limit: 20}\n", `o.yaml: services."example.inventory.v1.InventoryService".adaptive_limit.max_limit: `},
	} {
		_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n"+tc.body), nil, inventory)
		if err == nil {
			t.Fatalf("%s: accepted", tc.body)
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.key) || strings.Contains(msg, "Breaker.") || strings.Contains(msg, "leave it 0") {
			t.Errorf("%s: want the problem at %q in the file's words, got: %v", tc.body, tc.key, msg)
		}
	}
}

// TestAttackR18ChecksOverrideMixesInForce: random mixes of overrides, each
// right alone and possibly wrong with the annotation or with each other
// (backoffs, timeouts, count windows, adaptive bounds under permits, the
// cache's ttls, hedging beside retries, dedup ttl and lease, shedding
// limits), at the service, on GetStock and on ReserveStock, from the file
// and from variables: whatever the loader accepts, NewClient builds and
// Validate passes, and ServerOptions and NewGuard take or ServerOptions
// refuses naming a key. A value wrong in force that each level's check
// hid would fail here.
func TestAttackR18ChecksOverrideMixesInForce(t *testing.T) {
	shared := []string{
		"retry.initial_backoff=2s", "retry.max_backoff=10ms", "retry.max_attempts=1", "retry.max_attempts=5", "timeout=2s", "timeout=10ms",
		"overall_timeout=1s", "overall_timeout=5ms", "circuit_breaker.window_calls=10", "circuit_breaker.window_calls=50", "circuit_breaker.minimum_calls=100",
		"circuit_breaker.minimum_calls=5", "circuit_breaker.window=5s", "bulkhead.permits=1", "bulkhead.permits=200", "adaptive_limit.min_limit=10",
		"adaptive_limit.max_limit=5", "adaptive_limit.initial_limit=50", "adaptive_limit.tolerance=1", "rate_limit.requests_per_second=0.5",
		"rate_limit.burst=1", "rate_limit.requests_per_second=1e9", "server.min_deadline=2s", "server.default_timeout=1s", "shedding.low=100",
		"shedding.normal=5", "shedding.critical=1000", "client_throttle.k=1", "retry_budget.ratio=1", "retry_budget.window=1ns",
	}
	method := []string{
		"hedging.delay=500ms", "hedging.delay=1ms", "retry.max_attempts=1", "retry.initial_backoff=1ms", "cache.fresh_ttl=10m", "cache.stale_ttl=500ms",
		"cache.stale_ttl=1h", "cache.fresh_ttl=100ms", "circuit_breaker.per_method=true", "circuit_breaker.minimum_calls=3", "bulkhead.per_method=true",
		"bulkhead.permits=1", "adaptive_limit.per_method=true", "adaptive_limit.max_limit=3", "rate_limit.per_method=true", "rate_limit.requests_per_second=2",
		"timeout=100ms", "overall_timeout=50ms", "server.default_timeout=5ms", "server.min_deadline=1s", "server.dedup.ttl=1s", "server.dedup.lease=1h",
		"server.dedup.lease=100ms",
	}
	pick := func(r *rand.Rand, pool []string, most int) []string {
		var out []string
		used := map[string]bool{}
		for range r.Intn(most + 1) {
			l := pool[r.Intn(len(pool))]
			k, _, _ := strings.Cut(l, "=")
			if !used[k] {
				used[k] = true
				out = append(out, l)
			}
		}
		return out
	}
	r := rand.New(rand.NewSource(18))
	accepted, refused := 0, 0
	for range 1500 {
		var b strings.Builder
		b.WriteString("services:\n  example.inventory.v1.InventoryService:\n")
		for _, l := range pick(r, shared, 3) {
			k, v, _ := strings.Cut(l, "=")
			b.WriteString("    " + r18Leaf(k, v, true) + "\n")
		}
		methods := map[string][]string{"GetStock": pick(r, method, 3), "ReserveStock": pick(r, method, 2)}
		b.WriteString("    methods:\n")
		for _, m := range []string{"GetStock", "ReserveStock"} {
			b.WriteString("      " + m + ":\n")
			if len(methods[m]) == 0 {
				b.WriteString("        {}\n")
			}
			for _, l := range methods[m] {
				k, v, _ := strings.Cut(l, "=")
				b.WriteString("        " + r18Leaf(k, v, true) + "\n")
			}
		}
		var env []string
		for _, l := range pick(r, shared, 1) {
			k, v, _ := strings.Cut(l, "=")
			env = append(env, override.EnvName("example.inventory.v1.InventoryService", "", k)+"="+v)
		}
		body := b.String()
		set, err := override.Parse("o.yaml", []byte(body), env, inventory)
		if err != nil {
			refused++
			seen := map[string]bool{}
			for _, line := range strings.Split(err.Error(), "\n") {
				if seen[line] {
					t.Errorf("%s%v: reported twice: %s", body, env, line)
				}
				seen[line] = true
				if !strings.Contains(line, "o.yaml") && !strings.Contains(line, "RESILIENT__") {
					t.Errorf("%s%v: a refusal names neither a key nor a variable: %s", body, env, line)
				}
			}
			continue
		}
		accepted++
		p := inventory.Clone()
		c, err := runtime.NewClient(&p, set.Options(&p)...)
		if err != nil {
			t.Errorf("%s%v: accepted by the loader, refused by NewClient: %v", body, env, err)
			continue
		}
		if err := c.Policy().Validate(); err != nil {
			t.Errorf("%s%v: accepted by the loader, the policy in force refused by Validate: %v", body, env, err)
		}
		sv := inventoryv1.InventoryServiceServerPolicy.Clone()
		opts, err := set.ServerOptions(&sv)
		if err != nil {
			if !strings.Contains(err.Error(), "o.yaml") && !strings.Contains(err.Error(), "RESILIENT__") {
				t.Errorf("%s%v: ServerOptions refused without naming the key: %v", body, env, err)
			}
			continue
		}
		if _, err := server.NewGuard([]*policy.Server{&sv}, append(opts, server.WithStore(server.NewMemoryStore(8)))...); err != nil {
			t.Errorf("%s%v: accepted by the loader and ServerOptions, refused by NewGuard: %v", body, env, err)
		}
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted < 50 || refused < 50 {
		t.Fatalf("%d accepted, %d refused: the mixes try too little on one side", accepted, refused)
	}
}

// TestAttackR18ChecksOverrideSheddingCode: an unknown shedding code in an
// override is told the two codes the field holds, never a code list's
// advice ("such as "UNAVAILABLE" or "DEADLINE_EXCEEDED"") the field
// refuses next.
func TestAttackR18ChecksOverrideSheddingCode(t *testing.T) {
	for _, code := range []string{"BOGUS", `""`, "deadline_exceeded", "not-found"} {
		_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService:\n    shedding: {code: "+code+"}\n"), nil, inventory)
		const want = `o.yaml: services."example.inventory.v1.InventoryService".shedding.code: must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got `
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "DEADLINE_EXCEEDED") {
			t.Errorf("shedding.code %s: want %q…, got %v", code, want, err)
		}
	}
}
