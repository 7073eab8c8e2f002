package override_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

const (
	invEnv = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE"
	payEnv = "RESILIENT__EXAMPLE_PAYMENTS_V1_PAYMENTSSERVICE"
	pay    = `services."example.payments.v1.PaymentsService"`
)

// refused parses a file and variables and returns the error, failing the
// test when they are accepted or when parsing panics.
func refused(t *testing.T, file string, env ...string) string {
	t.Helper()
	var (
		s   *override.Set
		err error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Parse panicked on %q %q: %v", file, env, r)
			}
		}()
		var data []byte
		if file != "" {
			data = []byte(file)
		}
		s, err = override.Parse("o.yaml", data, env, inventory, payments)
	}()
	if err == nil {
		t.Errorf("accepted %q %q; keys %v", file, env, s.Keys())
		return ""
	}
	if s != nil {
		t.Errorf("refused %q but returned a Set", file)
	}
	return err.Error()
}

// billionLaughs expands to 9^9 strings through aliases.
const billionLaughs = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func svcYAML(body string) string {
	return "services:\n  example.inventory.v1.InventoryService:\n" + body
}

// TestAttackOverrideFileShapes: every way a file can hold something the
// operator did not mean is refused, naming the file and the key, never
// decided silently (the last of two keys, the first of two documents,
// JSON followed by more text, an empty group or list that changes
// nothing).
func TestAttackOverrideFileShapes(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"duplicate key", svcYAML("    timeout: 1s\n    timeout: 2s\n"), `o.yaml: not valid YAML or JSON: yaml: unmarshal errors: line 4: key "timeout" already set in map`},
		{"duplicate service", svcYAML("    timeout: 1s\n") + "  example.inventory.v1.InventoryService:\n    timeout: 2s\n", `already set in map`},
		{"duplicate method", svcYAML("    methods:\n      GetStock: {timeout: 1s}\n      GetStock: {timeout: 2s}\n"), `key "GetStock" already set in map`},
		{"duplicate key in JSON", `{"services": {"example.inventory.v1.InventoryService": {"timeout": "1s", "timeout": "2s"}}}`, `already set in map`},
		{"a second document", svcYAML("    timeout: 1s\n") + "---\n" + svcYAML("    timeout: 2s\n"), "o.yaml: holds more than one YAML document (separated by ---), and only the first would be read"},
		{"overrides after an empty document", "---\n---\n" + svcYAML("    timeout: 2s\n"), "holds more than one YAML document"},
		{"JSON with trailing text", `{"services": {}} garbage`, "o.yaml: not valid YAML or JSON: "},
		{"two JSON objects", `{"services": {}}{"services": {"x": {}}}`, "o.yaml: not valid YAML or JSON: "},
		{"NaN", svcYAML("    retry_budget: {ratio: .nan}\n"), `o.yaml: services."example.inventory.v1.InventoryService".retry_budget.ratio: must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got ".nan"`},
		{"infinity", svcYAML("    methods:\n      GetStock:\n        retry: {backoff_multiplier: .inf}\n"), `o.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.retry.backoff_multiplier: must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got ".inf"`},
		{"NaN as text", svcYAML("    retry_budget: {ratio: NaN}\n"), inv + `.retry_budget.ratio: must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got "NaN"`},
		{"a top-level list", "- services\n", "o.yaml: must hold a mapping with one key, services"},
		{"services as a list", "services: [a]\n", "o.yaml: services: must be a mapping"},
		{"an empty group", svcYAML("    circuit_breaker: {}\n"), inv + ".circuit_breaker: sets nothing: name the fields of circuit_breaker to change"},
		{"retry: {} on a write", "services:\n  example.payments.v1.PaymentsService:\n    methods:\n      Charge:\n        retry: {}\n", pay + ".methods.Charge.retry: sets nothing"},
		{"an empty list of codes", svcYAML("    methods:\n      GetStock:\n        retry: {retryable_codes: []}\n"), inv + ".methods.GetStock.retry.retryable_codes: names no status code, which would change nothing: remove it to keep the annotated codes; to stop retrying, set retry.max_attempts to 1"},
		{"an empty list of failure codes", svcYAML("    circuit_breaker: {failure_codes: []}\n"), inv + ".circuit_breaker.failure_codes: names no status code"},
		{"overflowing duration", svcYAML("    timeout: 9999999999h\n"), inv + `.timeout: not a duration: "9999999999h"`},
		{"duration without unit", svcYAML("    timeout: 100\n"), inv + `.timeout: not a duration: "100"; write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`},
		{"duration as a float", svcYAML("    timeout: 1.5\n"), inv + `.timeout: not a duration: "1.5"`},
		{"negative duration", svcYAML("    timeout: -1s\n"), inv + `.timeout: must be positive, got -1s`},
		{"zero duration", svcYAML("    timeout: 0s\n"), inv + `.timeout: must be positive, got 0s`},
		{"empty duration", svcYAML("    timeout: \"\"\n"), inv + `.timeout: not a duration: ""`},
		{"unicode digits", svcYAML("    timeout: ١s\n"), inv + `.timeout: not a duration: "١s"`},
		{"full-width unit", svcYAML("    timeout: 1ｓ\n"), inv + `.timeout: not a duration: "1ｓ"`},
		{"binary tag", svcYAML("    timeout: !!binary aGVsbG8=\n"), inv + `.timeout: not a duration: "hello"`},
		{"huge integer", svcYAML("    retry_budget: {min_retries: 99999999999999999999}\n"), inv + ".retry_budget.min_retries: must be a whole number from 0 to 4294967295"},
		{"just over uint32", svcYAML("    retry_budget: {min_retries: 4294967296}\n"), inv + ".retry_budget.min_retries: must be a whole number from 0 to 4294967295, got \"4294967296\""},
		{"fractional count", svcYAML("    retry_budget: {min_retries: 1.5}\n"), ".retry_budget.min_retries: must be a whole number"},
		{"negative count", svcYAML("    retry_budget: {min_retries: -1}\n"), ".retry_budget.min_retries: must be a whole number"},
		{"bool for a count", svcYAML("    methods:\n      GetStock:\n        retry: {max_attempts: true}\n"), ".methods.GetStock.retry.max_attempts: must be a whole number from 0 to 4294967295, written in decimal digits as 3 (no sign, point, exponent, \"_\", leading zero or 0x), got \"true\""},
		{"a code as text", svcYAML("    methods:\n      GetStock:\n        retry: {retryable_codes: UNAVAILABLE}\n"), `.retry.retryable_codes: must be a list of status code names`},
		{"a code in lower case", svcYAML("    methods:\n      GetStock:\n        retry: {retryable_codes: [unavailable]}\n"), `retryable_codes[0]: unknown status code "unavailable": did you mean "UNAVAILABLE"?`},
		{"method in lower case", svcYAML("    methods:\n      getStock: {timeout: 1s}\n"), inv + ".methods.getStock: unknown method of example.inventory.v1.InventoryService (did you mean GetStock?): its methods are GetStock"},
		{"service in lower case", "services:\n  example.inventory.v1.inventoryservice: {timeout: 1s}\n", `services."example.inventory.v1.inventoryservice": unknown service`},
		{"service with a space", "services:\n  \"example.inventory.v1.InventoryService \": {timeout: 1s}\n", `services."example.inventory.v1.InventoryService ": unknown service`},
		{"camelCase field", svcYAML("    methods:\n      GetStock:\n        retry: {maxAttempts: 2}\n"), "retry.maxAttempts: unknown field (did you mean max_attempts?)"},
		{"misspelt field", svcYAML("    circuit_breaker: {cooldown: 1s}\n"), "circuit_breaker.cooldown: unknown field (did you mean cool_down?)"},
		{"an anchor's name at the top", "a: &x {timeout: 1s}\nservices:\n  example.inventory.v1.InventoryService: *x\n", "o.yaml: a: unknown key"},
		{"a null service", "services:\n  example.inventory.v1.InventoryService: null\n", inv + ": must be a mapping"},
		{"a null group", svcYAML("    circuit_breaker: null\n"), inv + ".circuit_breaker: must be a mapping of circuit_breaker fields"},
		{"a complex key", svcYAML("    ? [a, b]\n    : 1\n"), "o.yaml: not valid YAML or JSON: "},
		{"billion laughs", billionLaughs, "o.yaml: not valid YAML or JSON: yaml: document contains excessive aliasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refused(t, tc.file)
			if !strings.Contains(got, tc.want) {
				t.Errorf("got\n%s\nwant it to contain\n%s", got, tc.want)
			}
			for _, line := range strings.Split(got, "\n") {
				if !strings.HasPrefix(line, "o.yaml") {
					t.Errorf("a line of the report does not name the file: %q", line)
				}
			}
		})
	}
}

// TestAttackOverrideFileAccepted: what YAML allows and means one thing is
// read as it means: an alias of a mapping inside services, a lone
// document marker, a byte-order mark.
func TestAttackOverrideFileAccepted(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"alias", svcYAML("    methods:\n      GetStock: &t {timeout: 150ms}\n      StockReport: *t\n")},
		{"document markers", "---\n" + svcYAML("    methods:\n      GetStock: {timeout: 150ms}\n      StockReport: {timeout: 150ms}\n") + "...\n"},
		{"trailing empty document", svcYAML("    methods:\n      GetStock: {timeout: 150ms}\n      StockReport: {timeout: 150ms}\n") + "---\n"},
		{"byte-order mark", "\ufeff" + svcYAML("    methods:\n      GetStock: {timeout: 150ms}\n      StockReport: {timeout: 150ms}\n")},
	} {
		s, err := override.Parse("o.yaml", []byte(tc.file), nil, inventory)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p := build(t, s).Policy()
		if p.Methods[0].Timeout != 150*time.Millisecond || p.Methods[3].Timeout != 150*time.Millisecond {
			t.Errorf("%s: timeouts %v and %v, want 150ms", tc.name, p.Methods[0].Timeout, p.Methods[3].Timeout)
		}
	}
}

// TestAttackOverrideEnvSpellings: every misspelling of a variable is
// refused with the name it must have, and every bad value with the
// variable's name.
func TestAttackOverrideEnvSpellings(t *testing.T) {
	must := func(want string) string {
		return "not read: the variable that overrides this value must be named " + want + " (upper case"
	}
	for _, tc := range []struct{ kv, want string }{
		{strings.ToLower(invEnv) + "__timeout=1s", must(invEnv + "__TIMEOUT")},
		{"RESILIENT_EXAMPLE_INVENTORY_V1_INVENTORYSERVICE_TIMEOUT=1s", must(invEnv + "__TIMEOUT")},
		{"RESILIENT__EXAMPLE__INVENTORY__V1__INVENTORYSERVICE__TIMEOUT=1s", must(invEnv + "__TIMEOUT")},
		{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORY_SERVICE__TIMEOUT=1s", must(invEnv + "__TIMEOUT")},
		{invEnv + "___TIMEOUT=1s", must(invEnv + "__TIMEOUT")},
		{invEnv + "__TIMEOUT__=1s", must(invEnv + "__TIMEOUT")},
		{invEnv + "__METHODS__GetStock__TIMEOUT=1s", must(invEnv + "__METHODS__GETSTOCK__TIMEOUT")},
		{invEnv + "__METHODS__GET_STOCK__TIMEOUT=1s", must(invEnv + "__METHODS__GETSTOCK__TIMEOUT")},
		{invEnv + "__METHODS__GETSTOCK__RETRY_MAX_ATTEMPTS=2", must(invEnv + "__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS")},
		{invEnv + "__CIRCUITBREAKER__COOLDOWN=1s", must(invEnv + "__CIRCUIT_BREAKER__COOL_DOWN")},
		{invEnv + "__METHODS__NOPE__TIMEOUT=1s", "unknown method NOPE of example.inventory.v1.InventoryService: its methods are GetStock"},
		{invEnv + "__METHODS__GETSTOK__TIMEOUT=1s", "unknown method GETSTOK of example.inventory.v1.InventoryService (did you mean GETSTOCK?): its methods are GetStock"},
		{invEnv + "__METHODS____TIMEOUT=1s", "unknown method  of example.inventory.v1.InventoryService"},
		{invEnv + "__METHODS__GETSTOCK=1s", "name the field after the service or method, as in " + invEnv + "__METHODS__GETSTOCK__TIMEOUT"},
		{invEnv + "=1s", "name the field after the service or method"},
		{invEnv + "__CIRCUIT_BREAKER=1s", "circuit_breaker is a group of settings"},
		{"RESILIENT__NOPE__TIMEOUT=1s", "unknown service NOPE"},
		{"RESILIENT__EXAMPLE.INVENTORY.V1.INVENTORYSERVICE__TIMEOUT=1s", "unknown service EXAMPLE.INVENTORY.V1.INVENTORYSERVICE"},
		{"RESILIENT=1", "RESILIENT (read as RESILIENT__): unknown service"},
		{"RESILIENTX=1", "unknown service X"},
		{invEnv + "__TIMEOUT=", `not a duration: ""`},
		{invEnv + "__TIMEOUT= 2s", `not a duration: " 2s"`},
		{invEnv + "__TIMEOUT=100", `not a duration: "100"`},
		{invEnv + "__TIMEOUT=9999999999h", `not a duration: "9999999999h"`},
		{invEnv + "__TIMEOUT=-5ms", "must be positive, got -5ms"},
		{invEnv + "__TIMEOUT=1s\x00", `not a duration: "1s\x00"`},
		{invEnv + "__RETRY_BUDGET__RATIO=NaN", `must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got "NaN"`},
		{invEnv + "__RETRY_BUDGET__RATIO=Inf", `must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got "Inf"`},
		{invEnv + "__RETRY_BUDGET__RATIO=1e-400", `must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x), got "1e-400"`},
		{invEnv + "__RETRY_BUDGET__MIN_RETRIES=99999999999999999999999", "must be a whole number from 0 to 4294967295"},
		{invEnv + "__RETRY_BUDGET__MIN_RETRIES=0x10", "must be a whole number"},
		{invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=", "names no status code, which would change nothing"},
		{invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=,,", "names no status code"},
		{invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=UNAVAILABLE,unknown", `unknown status code "unknown"`},
		{invEnv + "__METHODS__GETSTOCK__CACHE__KEY_FIELDS=sku", "key_fields"},
	} {
		name, _, _ := strings.Cut(tc.kv, "=")
		got := refused(t, "", tc.kv)
		if !strings.HasPrefix(got, name) || !strings.Contains(got, tc.want) {
			t.Errorf("%q: got\n%s\nwant it to start with the variable and contain\n%s", tc.kv, got, tc.want)
		}
	}
	// One name twice, with two values: neither is chosen.
	got := refused(t, "", invEnv+"__TIMEOUT=1s", invEnv+"__TIMEOUT=2s")
	if want := invEnv + `__TIMEOUT: is set twice in the environment, to "1s" and to "2s": keep one`; got != want {
		t.Errorf("a variable set twice gave\n%s\nwant\n%s", got, want)
	}
	if _, err := override.Parse("", nil, []string{invEnv + "__TIMEOUT=1s", invEnv + "__TIMEOUT=1s"}, inventory); err != nil {
		t.Errorf("a variable set twice to one value was refused: %v", err)
	}
	// Not of the family: left alone.
	if _, err := override.Parse("", nil, []string{"RESILIENCE_MODE=on", "X_RESILIENT__A=1"}, inventory); err != nil {
		t.Errorf("a variable of another family was read: %v", err)
	}
}

// alikePolicies are two services, and two methods of one, whose variable
// names are the same: a.b_c.S and a_b.c.S, Get and GET.
func alikePolicies() []*policy.Service {
	method := func(svc, name string) policy.Method {
		return policy.Method{Name: "/" + svc + "/" + name, Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second}
	}
	return []*policy.Service{
		{Name: "a.b_c.S", Methods: []policy.Method{method("a.b_c.S", "Get")}},
		{Name: "a_b.c.S", Methods: []policy.Method{method("a_b.c.S", "Get"), method("a_b.c.S", "GET")}},
	}
}

// TestAttackOverrideEnvAlike: a variable whose name means two services (or
// two methods) is refused instead of being applied to one of them,
// chosen by the order of a map.
func TestAttackOverrideEnvAlike(t *testing.T) {
	ps := alikePolicies()
	for _, tc := range []struct{ kv, want string }{
		{"RESILIENT__A_B_C_S__TIMEOUT=5s", "RESILIENT__A_B_C_S__TIMEOUT: means each of a.b_c.S and a_b.c.S, whose variables are spelled alike: override them in the file instead"},
		{"RESILIENT__A_B_C_S__METHODS__GET__TIMEOUT=5s", "means each of a.b_c.S and a_b.c.S"},
	} {
		for range 20 { // the map's order changes from run to run
			s, err := override.Parse("", nil, []string{tc.kv}, ps...)
			if err == nil {
				t.Fatalf("%s was applied (keys %v), want it refused", tc.kv, s.Keys())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: got %v, want %q", tc.kv, err, tc.want)
			}
		}
	}
	// The methods Get and GET of one service.
	_, err := override.Parse("", nil, []string{"RESILIENT__A_B_C_S__METHODS__GET__TIMEOUT=5s"}, ps[1])
	if err == nil || !strings.Contains(err.Error(), "means each of the methods Get and GET of a_b.c.S") {
		t.Errorf("a variable for two methods gave %v", err)
	}
	// The file names them apart.
	s, err := override.Parse("o.yaml", []byte("services:\n  a_b.c.S:\n    methods:\n      GET: {timeout: 5s}\n"), nil, ps...)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.NewClient(ps[1], s.Options(ps[1])...)
	if err != nil {
		t.Fatal(err)
	}
	if p := rt.Policy(); p.Methods[0].Timeout != time.Second || p.Methods[1].Timeout != 5*time.Second {
		t.Errorf("timeouts Get %v, GET %v; want 1s and 5s", p.Methods[0].Timeout, p.Methods[1].Timeout)
	}
}

// TestAttackOverrideNeverUnsafe: no path of the file or the variables
// makes the client repeat Charge (not idempotent, no key): retries at the
// service or the method, codes that would turn retries on, hedging, a
// key, idempotency itself.
func TestAttackOverrideNeverUnsafe(t *testing.T) {
	const charge = "Charge is not idempotent and has no idempotency_key, so a retry could apply it twice"
	payYAML := func(body string) string { return "services:\n  example.payments.v1.PaymentsService:\n" + body }
	for _, tc := range []struct {
		file string
		env  []string
		want string
	}{
		{payYAML("    retry: {max_attempts: 2}\n"), nil, pay + ".retry: " + charge},
		{payYAML("    retry: {retryable_codes: [UNAVAILABLE]}\n"), nil, charge},
		{payYAML("    retry: {initial_backoff: 1ms}\n"), nil, charge},
		{payYAML("    methods:\n      Charge:\n        retry: {max_attempts: 2}\n"), nil, pay + ".methods.Charge.retry: " + charge},
		{"", []string{payEnv + "__RETRY__MAX_ATTEMPTS=2"}, payEnv + "__RETRY: " + charge},
		{"", []string{payEnv + "__METHODS__CHARGE__RETRY__RETRYABLE_CODES=UNAVAILABLE"}, charge},
		{payYAML("    methods:\n      Charge:\n        hedging: {delay: 10ms}\n"), nil, "Charge is not idempotent"},
		{payYAML("    methods:\n      Charge:\n        idempotent: true\n        retry: {max_attempts: 2}\n"), nil, ".methods.Charge.idempotent: idempotent is part of the service's contract"},
		{payYAML("    idempotent: true\n"), nil, ".idempotent: idempotent is part of the service's contract"},
		{payYAML("    methods:\n      Charge:\n        idempotency_key: order_id\n"), nil, "idempotency_key is part of the service's contract"},
		{"", []string{payEnv + "__METHODS__CHARGE__GENERATE_IDEMPOTENCY_KEY=true"}, "generate_idempotency_key is part of the service's contract"},
		{"", []string{invEnv + "__METHODS__RESERVESTOCK__IDEMPOTENCY_KEY="}, "idempotency_key is part of the service's contract"},
		{"", []string{invEnv + "__METHODS__GETSTOCK__IDEMPOTENT=false"}, "idempotent is part of the service's contract"},
		{"", []string{invEnv + "__METHODS__WATCHSTOCK__RETRY__MAX_ATTEMPTS=3"}, "streams are not retried"},
		{"", []string{invEnv + "__METHODS__WATCHSTOCK__HEDGING__DELAY=1ms"}, "streams are not hedged"},
		// The plugin refuses a rate limit of its own on a stream, which
		// the runtime would not apply: so must an override.
		{svcYAML("    methods:\n      WatchStock:\n        rate_limit: {per_method: true, requests_per_second: 1}\n"), nil,
			inv + ".methods.WatchStock.rate_limit.per_method: streams do not go through the rate limit, and WatchStock is a streaming method: remove this override"},
		{"", []string{invEnv + "__METHODS__WATCHSTOCK__RATE_LIMIT__PER_METHOD=true"}, "streams do not go through the rate limit"},
	} {
		got := refused(t, tc.file, tc.env...)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q %q: got\n%s\nwant it to contain\n%s", tc.file, tc.env, got, tc.want)
		}
	}
	// Turning retries off on the write stays allowed: never dangerous.
	if _, err := override.Parse("o.yaml", []byte(payYAML("    methods:\n      Charge:\n        retry: {max_attempts: 1}\n")), nil, payments); err != nil {
		t.Errorf("retry: {max_attempts: 1} on Charge was refused: %v", err)
	}
}

// TestAttackOverrideEveryProblemAtOnce: bad values of the file and of the
// variables, and a value that does not apply, come in one report, one
// line each.
func TestAttackOverrideEveryProblemAtOnce(t *testing.T) {
	got := refused(t, svcYAML("    timeout: fast\n    circuit_breaker: {cooldown: 1s}\n    methods:\n      GetStock:\n        retry: {max_attempts: 0}\n"),
		invEnv+"__RETRY_BUDGET__RATIO=2", payEnv+"__RETRY__MAX_ATTEMPTS=3", "RESILIENT_NOPE=1")
	lines := strings.Split(got, "\n")
	for _, want := range []string{
		inv + ".timeout: not a duration",
		inv + ".circuit_breaker.cooldown: unknown field (did you mean cool_down?)",
		inv + ".methods.GetStock.retry.max_attempts: must be at least 1",
		invEnv + "__RETRY_BUDGET__RATIO: must be in (0, 1]",
		"Charge is not idempotent",
		"RESILIENT_NOPE",
	} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d lines contain %q, want 1:\n%s", n, want, got)
		}
	}
	if len(lines) != 6 {
		t.Errorf("%d lines, want 6:\n%s", len(lines), got)
	}
}

// TestAttackOverrideChangesShowEveryValue: Describe and Changes list every
// value an override changed, on every method a service-level value
// reaches, with the key that changed it, and a variable over the file
// names the variable.
func TestAttackOverrideChangesShowEveryValue(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(svcYAML("    timeout: 100ms\n    circuit_breaker: {failure_codes: [UNAVAILABLE]}\n    methods:\n      GetStock:\n        retry: {max_attempts: 1}\n")),
		[]string{invEnv + "__METHODS__STOCKREPORT__TIMEOUT=50ms"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	got := map[string]runtime.Change{}
	for _, c := range rt.Changes() {
		got[c.Key] = c
	}
	fileKey := "o.yaml: " + inv
	for key, want := range map[string][3]string{
		"methods.GetStock.timeout":            {"300ms", "100ms", fileKey + ".timeout"},
		"methods.ReserveStock.timeout":        {"300ms", "100ms", fileKey + ".timeout"},
		"methods.WatchStock.timeout":          {"1m0s", "100ms", fileKey + ".timeout"},
		"methods.StockReport.timeout":         {"300ms", "50ms", invEnv + "__METHODS__STOCKREPORT__TIMEOUT"},
		"methods.GetStock.retry.max_attempts": {"3", "1", fileKey + ".methods.GetStock.retry.max_attempts"},
		"circuit_breaker.failure_codes":       {"[DEADLINE_EXCEEDED UNAVAILABLE]", "[UNAVAILABLE]", fileKey + ".circuit_breaker.failure_codes"},
	} {
		c, ok := got[key]
		if !ok {
			t.Errorf("Changes lacks %s; has %v", key, rt.Changes())
			continue
		}
		if c.Annotated != want[0] || c.Value != want[1] || c.Source != want[2] {
			t.Errorf("%s: %s → %s from %s, want %s → %s from %s", key, c.Annotated, c.Value, c.Source, want[0], want[1], want[2])
		}
		if line := fmt.Sprintf("%s: %s → %s (%s)", key, c.Annotated, c.Value, c.Source); !strings.Contains(rt.Describe(), line) {
			t.Errorf("Describe lacks %q", line)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d changes, want 6: %v", len(got), rt.Changes())
	}
}
