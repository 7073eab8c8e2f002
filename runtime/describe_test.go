package runtime

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// setAll gives every field of the struct v a value of its own, a group
// (a pointer to a struct) a value and each of its fields one, and records
// in want, by option name ("circuit_breaker.cool_down", "timeout"), how
// Describe must write it. Name, Kind and Methods, which Describe writes
// as headings, are left to the caller.
func setAll(t *testing.T, v reflect.Value, prefix string, n *int, want map[string]string) {
	t.Helper()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Name" || name == "Kind" || name == "Methods" {
			continue
		}
		f := v.Field(i)
		key := prefix + contract.OptionName(name)
		*n++
		switch f.Kind() {
		case reflect.Pointer:
			if f.Type().Elem().Kind() != reflect.Struct {
				t.Fatalf("%s (%s): the test cannot set a %s: teach setAll", key, name, f.Type())
			}
			f.Set(reflect.New(f.Type().Elem()))
			setAll(t, f.Elem(), key+".", n, want)
			continue
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			if f.Type() != reflect.TypeFor[time.Duration]() {
				t.Fatalf("%s: the test cannot set a %s: teach setAll", key, f.Type())
			}
			f.SetInt(int64(time.Duration(*n) * 7 * time.Millisecond))
		case reflect.Int, reflect.Int32:
			f.SetInt(int64(100 + *n))
		case reflect.Uint8, reflect.Uint32:
			f.SetUint(uint64(100 + *n))
		case reflect.Float64:
			f.SetFloat(0.5 + float64(*n)/1000)
			want[key] = strconv.FormatFloat(f.Float(), 'g', -1, 64)
			continue
		case reflect.String:
			f.SetString(fmt.Sprintf("f%d", *n))
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.String {
				t.Fatalf("%s: the test cannot set a %s: teach setAll", key, f.Type())
			}
			f.Set(reflect.ValueOf([]string{fmt.Sprintf("k%d", *n)}))
		default:
			t.Fatalf("%s: the test cannot set a %s: teach setAll", key, f.Type())
		}
		want[key] = fmt.Sprint(f.Interface()) // durations, code sets and priorities by their String
	}
}

// describedLines reads a description into its lines by paragraph: "" for
// the service's, a method's short name for its own; each line keyed by
// what comes before its ": " ("circuit_breaker (shared)", "retry").
func describedLines(d string) map[string]map[string]string {
	out := map[string]map[string]string{"": {}}
	para := ""
	for _, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n")[1:] {
		switch {
		case strings.HasPrefix(line, "  /"):
			para = shortName(strings.TrimSpace(line))
			out[para] = map[string]string{}
		case strings.HasPrefix(line, "    ") && para != "":
			head, rest, ok := strings.Cut(strings.TrimSpace(line), ": ")
			if !ok || strings.Contains(head, ",") { // the kind and the values outside groups
				head, rest = "", strings.TrimSpace(line)
			}
			out[para][head] = rest
		default:
			head, rest, _ := strings.Cut(strings.TrimSpace(line), ": ")
			out[""][head] = rest
		}
	}
	return out
}

// pairsOf reads a group's "name value, name value" into a map, or with
// sep ": " the values of a method's first line ("unary, name: value, …").
func pairsOf(s, sep string) map[string]string {
	out := map[string]string{}
	for _, p := range strings.Split(s, ", ") {
		name, value, _ := strings.Cut(p, sep)
		out[name] = value
	}
	return out
}

// TestDescribeShowsEveryField walks the policy types by reflection: every
// field of every group of the service and of a method, and every value of
// a method outside a group, each set to a value of its own, shows in
// Describe on its group's line under its option name. A field added to a
// group shows with no change to describe.go; one this test cannot set
// fails it, naming the field.
func TestDescribeShowsEveryField(t *testing.T) {
	n := 0
	svcWant, methodWant := map[string]string{}, map[string]string{}
	p := policy.Service{Name: "t.S"}
	setAll(t, reflect.ValueOf(&p).Elem(), "", &n, svcWant)
	m := policy.Method{Name: "/t.S/All", Kind: policy.KindUnary}
	setAll(t, reflect.ValueOf(&m).Elem(), "", &n, methodWant)
	p.Methods = []policy.Method{m,
		{Name: "/t.S/Shares", Kind: policy.KindUnary, Timeout: time.Second},
		{Name: "/t.S/Watch", Kind: policy.KindServerStreaming}}
	d := describe(&p)
	lines := describedLines(d)

	shareable := map[string]bool{}
	for _, g := range groupsOf(reflect.TypeFor[policy.Service]()) {
		shareable[g] = reflect.ValueOf(m).FieldByName(contract.GoName(g)).IsValid()
	}
	check := func(para string, want map[string]string, label func(group string) string) {
		for key, value := range want {
			group, field, inGroup := strings.Cut(key, ".")
			head, sep := "", ": "
			if inGroup {
				head, sep = group+label(group), " "
			} else {
				field = key
			}
			line, ok := lines[para][head]
			if !ok {
				t.Errorf("%s: no line %q for %s:\n%s", cmp.Or(para, "the service"), head, key, d)
				continue
			}
			got, ok := pairsOf(line, sep)[field]
			if !ok || (got != value && !strings.HasPrefix(got, value+" (")) {
				t.Errorf("%s: %s is %q (listed: %v), want %q, on the line %q", cmp.Or(para, "the service"), key, got, ok, value, line)
			}
		}
	}
	check("", svcWant, func(g string) string {
		if shareable[g] {
			return " (shared)"
		}
		return ""
	})
	check("All", methodWant, func(g string) string {
		if shareable[g] {
			return " (own)"
		}
		return ""
	})
	if first := lines["All"][""]; !strings.HasPrefix(first, "unary, ") {
		t.Errorf("All's first line %q does not name its kind", first)
	}

	// A unary method without groups of its own shares each of the
	// service's; a stream those it goes through, and lists no other.
	for g, s := range shareable {
		if !s {
			continue
		}
		if got := lines["Shares"][g]; got != "shared" {
			t.Errorf("Shares: %s is %q, want shared:\n%s", g, got, d)
		}
		got, listed := lines["Watch"][g]
		switch {
		case unaryOnly[g] && listed:
			t.Errorf("Watch, a stream, lists %s: %q", g, got)
		case !unaryOnly[g] && got != "shared":
			t.Errorf("Watch: %s is %q, want shared", g, got)
		}
	}
	if got := lines["Shares"]["retry"]; got != "none" {
		t.Errorf("Shares: retry is %q, want none", got)
	}
	if first := lines["Watch"][""]; !strings.HasPrefix(first, "server-streaming, ") {
		t.Errorf("Watch's first line %q does not name its kind", first)
	}

	// A service without groups: each method has none of the shareable
	// groups that apply to it.
	bare := policy.Service{Name: "t.Bare", Methods: []policy.Method{{Name: "/t.Bare/Get", Kind: policy.KindUnary}}}
	d = describe(&bare)
	lines = describedLines(d)
	for g, s := range shareable {
		if s && lines["Get"][g] != "none" {
			t.Errorf("Get of a service without groups: %s is %q, want none:\n%s", g, lines["Get"][g], d)
		}
	}
}

// TestDescribeValuesInForce: Describe writes the values the runtime uses
// where the policy leaves them to a default (an adaptive limit's, its
// maximum under the bulkhead's permits; a throttler's), keeps a value that
// is set, says a retry of one attempt retries nothing, and a budget the
// service does not set is the default.
func TestDescribeValuesInForce(t *testing.T) {
	p := policy.Service{
		Name:           "t.S",
		Bulkhead:       &policy.Bulkhead{Permits: 6},
		AdaptiveLimit:  &policy.AdaptiveLimit{Tolerance: 3},
		ClientThrottle: &policy.Throttle{MaxRefusal: 0.5},
		Methods: []policy.Method{
			{Name: "/t.S/Once", Idempotent: true, Timeout: time.Second, Retry: &policy.Retry{MaxAttempts: 1, InitialBackoff: time.Millisecond}},
			{Name: "/t.S/Twice", Idempotent: true, Timeout: time.Second, Retry: &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1, RetryableCodes: 1 << 14},
				Bulkhead: &policy.Bulkhead{Permits: 3}, AdaptiveLimit: &policy.AdaptiveLimit{}},
		},
	}
	d := describe(&p)
	for _, want := range []string{
		"  retry_budget (default: the service sets none, and a method retries or hedges): ratio 0.1, min_retries 10, window 10s\n",
		"  adaptive_limit (shared): min_limit 1, max_limit 6, initial_limit 6, tolerance 3, smoothing 0.5, baseline_window 30s\n",
		"  client_throttle: k 2, window 5s, max_refusal 0.5\n",
		"/Once\n    unary, idempotent: true, idempotency_key: none, timeout: 1s, overall_timeout: none\n    retry: none (max_attempts 1)\n",
		"    bulkhead (own): permits 3, max_wait 0s\n",
		"    adaptive_limit (own): min_limit 1, max_limit 3, initial_limit 3, tolerance 1.5, smoothing 0.5, baseline_window 30s\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
	// The policy itself is left as it was.
	if p.AdaptiveLimit.MaxLimit != 0 || p.Methods[1].AdaptiveLimit.MinLimit != 0 || p.ClientThrottle.K != 0 {
		t.Errorf("describe wrote the values in force into the policy: %+v %+v", p.AdaptiveLimit, p.ClientThrottle)
	}
}
