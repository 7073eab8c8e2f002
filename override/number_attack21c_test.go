package override_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// TestAttack21cExtremeNumbersNeverWrap: every value at the edge of what
// the number rule reads (the largest count, the longest duration, the
// largest float64 written in decimal digits) given to GetStock's retry,
// timeouts and hedging, from the file and from the variables, is either
// refused with an error naming its key, or accepted by the client, whose
// call bound then never wraps below the longest value given; nothing
// panics. One nanosecond or one count more is refused by the number rule.
func TestAttack21cExtremeNumbersNeverWrap(t *testing.T) {
	const maxDur = "2562047h47m16.854775807s" // math.MaxInt64 ns
	bigFloat := "1" + strings.Repeat("0", 308)
	values := map[string]string{
		"timeout":                        maxDur,
		"overall_timeout":                "",
		"retry.max_attempts":             "4294967295",
		"retry.initial_backoff":          maxDur,
		"retry.max_backoff":              maxDur,
		"retry.backoff_multiplier":       bigFloat,
		"circuit_breaker.cool_down":      maxDur,
		"bulkhead.permits":               "4294967295",
		"bulkhead.max_wait":              maxDur,
		"retry_budget.min_retries":       "4294967295",
		"rate_limit.burst":               "4294967295",
		"rate_limit.requests_per_second": bigFloat,
	}
	var file strings.Builder
	file.WriteString("services:\n  example.inventory.v1.InventoryService:\n    methods:\n      GetStock:\n")
	var env []string
	for k, v := range values {
		if v == "" {
			continue
		}
		if strings.HasPrefix(k, "retry.") || k == "timeout" {
			parts := strings.Split(k, ".")
			if len(parts) == 1 {
				fmt.Fprintf(&file, "        %s: %q\n", k, v)
			}
			env = append(env, override.EnvName("example.inventory.v1.InventoryService", "GetStock", k)+"="+v)
			continue
		}
		env = append(env, override.EnvName("example.inventory.v1.InventoryService", "", k)+"="+v)
	}
	for _, tc := range []struct {
		name string
		file string
		env  []string
	}{{"file", file.String() + "        retry: {max_attempts: 4294967295, initial_backoff: \"" + maxDur + "\", max_backoff: \"" + maxDur + "\", backoff_multiplier: " + bigFloat + "}\n", nil},
		{"variables", "", env}} {
		t.Run(tc.name, func(t *testing.T) {
			var s *override.Set
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Parse panicked: %v", p)
					}
				}()
				s, err = override.Parse("o.yaml", []byte(tc.file), tc.env, inventory)
			}()
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					if !strings.Contains(line, ": ") || strings.Contains(line, "panic") {
						t.Errorf("a refusal line that names no key: %q", line)
					}
				}
				t.Logf("refused: %v", err)
				return
			}
			rt, err := runtime.NewClient(inventory, s.Options(inventory)...)
			if err != nil {
				t.Logf("the client refused: %v", err)
				return
			}
			p := rt.Policy()
			for i := range p.Methods {
				m := &p.Methods[i]
				if got := bound.Call(m); got < 0 || got < m.Timeout || got < m.OverallTimeout {
					t.Errorf("%s: bound %v below its timeout %v / overall %v: wrapped", m.Name, got, m.Timeout, m.OverallTimeout)
				}
			}
		})
	}
	// One past the edge, file and variable alike.
	for _, past := range []struct{ path, text, words string }{
		{"retry.max_attempts", "4294967296", "must be a whole number from 0 to 4294967295"},
		{"timeout", "2562047h47m16.854775808s", "longer than a duration holds"},
		{"timeout", "9223372036854775808ns", "longer than a duration holds"},
		{"timeout", "106751d", "not a duration"},
		{"retry.backoff_multiplier", "1" + strings.Repeat("0", 309), "float64 holds"},
		// 120 KB, about the most one variable holds on Linux (128 KiB):
		// 3,000,000 parts (6 MB) took 89 s under -race to be refused as
		// finer than a nanosecond; past 1000 characters it is refused
		// unread.
		{"timeout", strings.Repeat("1h", 60000) + strings.Repeat("0.5ns", 1), "is 120005 characters long"},
		{"timeout", strings.Repeat("1h", 199) + "0.5ns", "finer than a nanosecond"},
	} {
		name := override.EnvName("example.inventory.v1.InventoryService", "GetStock", past.path)
		_, err := override.Parse("o.yaml", nil, []string{name + "=" + past.text}, inventory)
		if err == nil || !strings.Contains(err.Error(), past.words) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%.40s: %.300v, want a refusal naming the variable, %q", name, past.text, err, past.words)
		}
	}
}
