package override_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-resilient/resilient/override"
)

// numberForm is one way to write a value, with what the loader must make
// of it: the value read (want), or the words of the refusal (refusal,
// after the key).
type numberForm struct {
	text    string
	want    any    // uint32, float64 or time.Duration when accepted
	refusal string // when refused
	notBare bool   // a YAML file cannot hold it bare: quoted only
	notFlow bool   // a flow mapping (JSON) cannot hold it bare: a comma
}

const (
	countWords    = `must be a whole number from 0 to 4294967295, written in decimal digits as 3 (no sign, point, exponent, "_", leading zero or 0x), got `
	realWords     = `must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got `
	durationWords = `; write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`
)

func notCount(text string) numberForm {
	return numberForm{text: text, refusal: countWords + strconv.Quote(text)}
}

func notReal(text string) numberForm {
	return numberForm{text: text, refusal: realWords + strconv.Quote(text)}
}

func notBool(text string) numberForm {
	return numberForm{text: text, refusal: "must be true or false, got " + strconv.Quote(text)}
}

func notDuration(text string) numberForm {
	return numberForm{text: text, refusal: "not a duration: " + strconv.Quote(text) + durationWords}
}

// TestNumberNotationIsOneForFileAndVariables: every form of a count, a
// fractional value, a duration and a bool is read the same from the file (bare,
// as YAML or JSON types it, and quoted) and from a variable: accepted as
// the same value, or refused in the same words, naming the key or the
// variable and the value as written.
func TestNumberNotationIsOneForFileAndVariables(t *testing.T) {
	huge := "1" + strings.Repeat("0", 400)
	tiny := "0." + strings.Repeat("0", 400) + "1"
	fields := []struct {
		path  string // under the inventory service
		forms []numberForm
		read  func(t *testing.T, s *override.Set) any
	}{{
		path: "retry_budget.min_retries",
		read: func(t *testing.T, s *override.Set) any { return build(t, s).Policy().Budget.MinRetries },
		forms: []numberForm{
			{text: "3", want: uint32(3)},
			{text: "0", want: uint32(0)},
			{text: "10", want: uint32(10)},
			{text: "4294967295", want: uint32(math.MaxUint32)},
			notCount("3.0"), notCount("1e1"), notCount("1E1"), notCount("0x10"), notCount("0X10"), notCount("0o10"),
			notCount("0b10"), notCount("+3"), notCount("010"), notCount("00"), notCount("1_0"), notCount("-1"),
			notCount("-0"), notCount(".5"), notCount("3."), {text: "1,000", refusal: countWords + `"1,000"`, notFlow: true}, notCount("three"), notCount("Inf"),
			notCount(".inf"), notCount(".nan"), notCount("3s"), notCount("٣"), notCount("３"),
			{text: "", refusal: countWords + `""`, notBare: true},
			{text: " 3", refusal: countWords + `" 3"`, notBare: true},
			// Bare, YAML reads them as nothing; quoted, they are text.
			{text: "~", refusal: countWords + `"~"`, notBare: true},
			{text: "null", refusal: countWords + `"null"`, notBare: true},
			{text: "4294967296", refusal: `must be a whole number from 0 to 4294967295, got "4294967296"`},
			{text: "99999999999999999999999", refusal: `must be a whole number from 0 to 4294967295, got "99999999999999999999999"`},
		},
	}, {
		path: "retry_budget.ratio",
		read: func(t *testing.T, s *override.Set) any { return build(t, s).Policy().Budget.Ratio },
		forms: []numberForm{
			{text: "0.5", want: 0.5},
			{text: "1", want: 1.0},
			{text: "1.0", want: 1.0},
			{text: "0.10", want: 0.1},
			{text: "0.000001", want: 0.000001},
			notReal("+0.5"), notReal(".5"), notReal("5."), notReal("05"), notReal("00.5"), notReal("5e-1"),
			notReal("0x1p-1"), notReal("0_5"), notReal("NaN"), notReal("Inf"), notReal("+Inf"), notReal(".inf"),
			notReal("-.inf"), notReal(".nan"), {text: "0,5", refusal: realWords + `"0,5"`, notFlow: true}, notReal("half"), notReal("--0.5"), notReal("0.5.1"),
			{text: "", refusal: realWords + `""`, notBare: true},
			// A negative value is read, and refused by the rule it breaks.
			{text: "-0.5", refusal: "must be in (0, 1], got -0.5"},
			{text: "1.5", refusal: "must be in (0, 1], got 1.5"},
			{text: huge, refusal: "must be a finite number that a float64 holds (at most about 1.8e308), got " + strconv.Quote(huge)},
			{text: tiny, refusal: "is too small for a float64 to hold, which would read it as 0, got " + strconv.Quote(tiny)},
		},
	}, {
		path: "circuit_breaker.cool_down",
		read: func(t *testing.T, s *override.Set) any { return build(t, s).Policy().Breaker.CoolDown },
		forms: []numberForm{
			{text: "5s", want: 5 * time.Second},
			{text: "1m30s", want: 90 * time.Second},
			{text: "1.5s", want: 1500 * time.Millisecond},
			{text: "0.25s", want: 250 * time.Millisecond},
			{text: "1h5m", want: time.Hour + 5*time.Minute},
			{text: "100ms", want: 100 * time.Millisecond},
			{text: "250us", want: 250 * time.Microsecond},
			{text: "250µs", want: 250 * time.Microsecond},
			{text: "1000000ns", want: time.Millisecond},
			notDuration("5"), notDuration("0"), notDuration("1.5"), notDuration("+5s"), notDuration("05s"),
			notDuration("1h05m"), notDuration("1e3ms"), notDuration("1_000ms"), notDuration("0x10s"),
			notDuration(".5s"), notDuration("5.s"), notDuration("5 s"), notDuration("5S"), notDuration("5sec"),
			notDuration("1d"), notDuration("s"), notDuration("1.5.5s"), notDuration("5s5"), notDuration("٥s"),
			notDuration("--5s"), notDuration("5s-"),
			{text: "", refusal: `not a duration: ""` + durationWords, notBare: true},
			{text: "-", refusal: `not a duration: "-"` + durationWords, notBare: true},
			{text: "-5s", refusal: "must be positive, got -5s"},
			{text: "0.5ns", refusal: `not a duration: "0.5ns" is finer than a nanosecond, which a duration counts in` + durationWords},
			{text: "1.0000000001s", refusal: `not a duration: "1.0000000001s" is finer than a nanosecond, which a duration counts in` + durationWords},
			{text: "9999999999h", refusal: `not a duration: "9999999999h" is longer than a duration holds (2562047h47m16.854775807s, about 292 years)`},
			{text: "2562047h47m16.854775808s", refusal: `not a duration: "2562047h47m16.854775808s" is longer than a duration holds (2562047h47m16.854775807s, about 292 years)`},
		},
	}, {
		path: "methods.GetStock.bulkhead.per_method",
		read: func(t *testing.T, s *override.Set) any {
			p := build(t, s).Policy()
			return p.Methods[0].Bulkhead != nil // its own, from per_method
		},
		forms: []numberForm{
			{text: "true", want: true},
			{text: "false", want: false},
			notBool("yes"), notBool("no"), notBool("on"), notBool("off"), notBool("y"), notBool("n"), notBool("1"),
			notBool("0"), notBool("t"), notBool("f"), notBool("True"), notBool("TRUE"), notBool("False"),
			{text: "", refusal: `must be true or false, got ""`, notBare: true},
			{text: " true", refusal: `must be true or false, got " true"`, notBare: true},
		},
	}}
	for _, f := range fields {
		path, method, indent := f.path, "", "    "
		if rest, ok := strings.CutPrefix(path, "methods."); ok {
			method, path, _ = strings.Cut(rest, ".")
			indent = "        "
		}
		group, leaf, _ := strings.Cut(path, ".")
		fileKey := `o.yaml: ` + inv + "." + f.path + ": "
		envName := override.EnvName("example.inventory.v1.InventoryService", method, path)
		yamlOf := func(value string) string {
			body := fmt.Sprintf("%s%s:\n%s  %s: %s\n", indent, group, indent, leaf, value)
			if method != "" {
				body = "    methods:\n      " + method + ":\n" + body
			}
			return svcYAML(body)
		}
		jsonOf := func(value string) string {
			body := fmt.Sprintf(`{%q: {%q: %s}}`, group, leaf, value)
			if method != "" {
				body = fmt.Sprintf(`{"methods": {%q: %s}}`, method, body)
			}
			return `{"services": {"example.inventory.v1.InventoryService": ` + body + `}}`
		}
		for _, form := range f.forms {
			ways := map[string]func() (*override.Set, error){
				"quoted in the file": func() (*override.Set, error) {
					return override.Parse("o.yaml", []byte(yamlOf(strconv.Quote(form.text))), nil, inventory)
				},
				"a variable": func() (*override.Set, error) {
					return override.Parse("o.yaml", nil, []string{envName + "=" + form.text}, inventory)
				},
			}
			if !form.notBare {
				ways["bare in the file"] = func() (*override.Set, error) {
					return override.Parse("o.yaml", []byte(yamlOf(form.text)), nil, inventory)
				}
			}
			if !form.notBare && !form.notFlow {
				ways["bare in JSON"] = func() (*override.Set, error) {
					return override.Parse("o.yaml", []byte(jsonOf(form.text)), nil, inventory)
				}
			}
			for way, parse := range ways {
				s, err := parse()
				switch {
				case form.refusal == "" && err != nil:
					t.Errorf("%s %q %s: refused: %v", f.path, form.text, way, err)
				case form.refusal == "":
					if got := f.read(t, s); fmt.Sprint(got) != fmt.Sprint(form.want) {
						t.Errorf("%s %q %s: read as %v, want %v", f.path, form.text, way, got, form.want)
					}
				case err == nil:
					t.Errorf("%s %q %s: accepted, want refused with %q", f.path, form.text, way, form.refusal)
				default:
					want := fileKey + form.refusal
					if way == "a variable" {
						want = envName + ": " + form.refusal
					}
					if got := err.Error(); got != want && !strings.HasPrefix(got, want+"; remove this override") {
						t.Errorf("%s %q %s: refused with\n%s\nwant\n%s", f.path, form.text, way, got, want)
					}
				}
			}
		}
	}
}

// TestNumberNotationOfEveryKind: the notation is the field's kind's, not
// a field's own: a count of a method's group, of the server side, and a
// fractional value of each group read the same forms.
func TestNumberNotationOfEveryKind(t *testing.T) {
	for _, tc := range []struct{ path, method, good, bad, words string }{
		{"retry.max_attempts", "GetStock", "2", "2.0", countWords},
		{"bulkhead.permits", "", "8", "0x8", countWords},
		{"rate_limit.burst", "", "100", "1e2", countWords},
		{"cache.max_entries", "GetStock", "100", "1_00", countWords},
		{"shedding.low", "", "4", "+4", countWords},
		{"retry.backoff_multiplier", "GetStock", "1.5", "15e-1", realWords},
		{"rate_limit.requests_per_second", "", "250", "2.5e2", realWords},
		{"circuit_breaker.failure_ratio", "", "0.25", ".25", realWords},
		{"retry.initial_backoff", "GetStock", "20ms", "020ms", "not a duration: "},
	} {
		env := override.EnvName("example.inventory.v1.InventoryService", tc.method, tc.path)
		if _, err := override.Parse("", nil, []string{env + "=" + tc.good}, inventory); err != nil {
			t.Errorf("%s=%s refused: %v", env, tc.good, err)
		}
		_, err := override.Parse("", nil, []string{env + "=" + tc.bad}, inventory)
		if err == nil || !strings.HasPrefix(err.Error(), env+": "+tc.words) || !strings.Contains(err.Error(), strconv.Quote(tc.bad)) {
			t.Errorf("%s=%s: got %v, want a refusal starting %q and naming the value", env, tc.bad, err, tc.words)
		}
		yamlPath := strings.ReplaceAll(tc.path, ".", ": {") + ": " + tc.bad + strings.Repeat("}", strings.Count(tc.path, "."))
		svc := "{" + yamlPath + "}"
		key := inv + "." + tc.path
		if tc.method != "" {
			svc = "{methods: {" + tc.method + ": {" + yamlPath + "}}}"
			key = inv + ".methods." + tc.method + "." + tc.path
		}
		_, err = override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService: "+svc+"\n"), nil, inventory)
		if err == nil || !strings.HasPrefix(err.Error(), "o.yaml: "+key+": "+tc.words) {
			t.Errorf("%s in the file: got %v, want a refusal starting %q", yamlPath, err, "o.yaml: "+key+": "+tc.words)
		}
	}
}

// TestNumberNotationREADMELines holds the README's examples of the
// number rule (section Overrides) to what the loader says.
func TestNumberNotationREADMELines(t *testing.T) {
	for _, tc := range []struct {
		file string
		env  []string
		want string
	}{
		{"services:\n  example.inventory.v1.InventoryService:\n    methods:\n      GetStock:\n        retry: {max_attempts: 3.0}\n", nil,
			`overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.retry.max_attempts: must be a whole number from 0 to 4294967295, written in decimal digits as 3 (no sign, point, exponent, "_", leading zero or 0x), got "3.0"`},
		{"", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY_BUDGET__RATIO=1e-1"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY_BUDGET__RATIO: must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got "1e-1"`},
		{"", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=5"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN: not a duration: "5"; write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`},
	} {
		_, err := override.Parse("overrides.yaml", []byte(tc.file), tc.env, inventory, payments)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got\n%v\nwant\n%s", err, tc.want)
		}
	}
}

// FuzzNumberNotation: whatever the text, a value quoted in the file and
// the same text in a variable are read alike: both accepted as the same
// value, or both refused in the same words after the key.
func FuzzNumberNotation(f *testing.F) {
	for _, s := range []string{"3", "3.0", "1e1", "0x10", "+3", "010", "1_0", "-1", "4294967296", "0.5", ".5", "NaN",
		"5s", "1m30s", "1h05m", "0", "0.5ns", "9999999999h", "-5s", "", "٣", "1µs"} {
		for kind := range uint8(3) {
			f.Add(s, kind)
		}
	}
	paths := []string{"retry_budget.min_retries", "retry_budget.ratio", "circuit_breaker.cool_down"}
	f.Fuzz(func(t *testing.T, text string, kind uint8) {
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			t.Skip("a variable holds no NUL, and YAML's \\x escape is a code point, not a byte")
		}
		path := paths[int(kind)%len(paths)]
		group, leaf, _ := strings.Cut(path, ".")
		file := svcYAML(fmt.Sprintf("    %s:\n      %s: %s\n", group, leaf, strconv.Quote(text)))
		fs, ferr := override.Parse("o.yaml", []byte(file), nil, inventory)
		env := override.EnvName("example.inventory.v1.InventoryService", "", path)
		es, eerr := override.Parse("o.yaml", nil, []string{env + "=" + text}, inventory)
		switch {
		case (ferr == nil) != (eerr == nil):
			t.Fatalf("%s %q: the file says %v, the variable %v", path, text, ferr, eerr)
		case ferr != nil:
			fileWords := strings.TrimPrefix(ferr.Error(), "o.yaml: "+inv+"."+path+": ")
			envWords := strings.TrimPrefix(eerr.Error(), env+": ")
			if fileWords != envWords || fileWords == ferr.Error() {
				t.Fatalf("%s %q: refused in other words:\n%v\n%v", path, text, ferr, eerr)
			}
		default:
			fp, ep := build(t, fs).Policy(), build(t, es).Policy()
			if fp.Budget.MinRetries != ep.Budget.MinRetries || fp.Budget.Ratio != ep.Budget.Ratio || fp.Breaker.CoolDown != ep.Breaker.CoolDown {
				t.Fatalf("%s %q: read as %+v %+v from the file, %+v %+v from the variable", path, text, fp.Budget, fp.Breaker.CoolDown, ep.Budget, ep.Breaker.CoolDown)
			}
		}
	})
}

// TestEmptyServiceOrMethodIsRefused: a service, its methods or a method
// written with nothing in it would change nothing, silently, as retry: {}
// would: refused, naming the key. A file with no service overrides
// nothing, as an empty file does.
func TestEmptyServiceOrMethodIsRefused(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"services: {example.inventory.v1.InventoryService: {}}\n",
			`o.yaml: ` + inv + `: sets nothing: name the annotation fields to change (timeout, retry, circuit_breaker, …) or methods, or remove it`},
		{"services: {example.inventory.v1.InventoryService: {methods: {}}}\n",
			`o.yaml: ` + inv + `.methods: sets nothing: name the methods to change (as in the .proto: GetStock, ReserveStock, WatchStock, StockReport), or remove it`},
		{"services: {example.inventory.v1.InventoryService: {timeout: 1s, methods: null}}\n",
			`o.yaml: ` + inv + `.methods: must be a mapping of method names (as in the .proto: GetStock) to their overrides`},
		{"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {}}}}\n",
			`o.yaml: ` + inv + `.methods.GetStock: sets nothing: name the annotation fields to change (timeout, retry, …), or remove it`},
	} {
		got := refused(t, tc.file)
		if got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.file, got, tc.want)
		}
	}
	for _, file := range []string{"services:\n", "services: {}\n", "services: null\n"} {
		if _, err := override.Parse("o.yaml", []byte(file), nil, inventory); err != nil {
			t.Errorf("%q, no service, was refused: %v", file, err)
		}
	}
}
