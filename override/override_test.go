package override_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	inventory = &inventoryv1.InventoryServiceResilientPolicy
	payments  = &paymentsv1.PaymentsServiceResilientPolicy
)

const inv = `services."example.inventory.v1.InventoryService"`

// build applies a set's options to the inventory policy and returns the
// client's policy and changes.
func build(t *testing.T, s *override.Set) *runtime.Client {
	t.Helper()
	rt, err := runtime.NewClient(inventory, s.Options(inventory)...)
	if err != nil {
		t.Fatalf("NewClient refused overrides the loader accepted: %v", err)
	}
	return rt
}

func TestFileOverridesServiceAndMethodValues(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    timeout: 250ms
    circuit_breaker: {cool_down: 5s, failure_codes: [UNAVAILABLE]}
    retry_budget: {ratio: 0.2}
    methods:
      GetStock:
        timeout: 0.1s
        retry: {max_attempts: 2}
      WatchStock:
        bulkhead: {permits: 2}
`), nil, inventory, payments)
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, s).Policy()
	get, reserve, watch := p.Methods[0], p.Methods[1], p.Methods[2]
	if get.Timeout != 100*time.Millisecond || reserve.Timeout != 250*time.Millisecond || watch.Timeout != 250*time.Millisecond {
		t.Errorf("timeouts %v %v %v, want the method's 100ms, else the service's 250ms", get.Timeout, reserve.Timeout, watch.Timeout)
	}
	if get.Retry.MaxAttempts != 2 || reserve.Retry.MaxAttempts != 3 {
		t.Errorf("max attempts %d %d", get.Retry.MaxAttempts, reserve.Retry.MaxAttempts)
	}
	if p.Breaker.CoolDown != 5*time.Second || p.Breaker.FailureCodes != policy.CodesOf(codes.Unavailable) || p.Breaker.MinimumCalls != 20 {
		t.Errorf("breaker %+v", p.Breaker)
	}
	if p.Budget.Ratio != 0.2 || watch.Bulkhead.Permits != 2 || watch.Bulkhead.MaxWait != 20*time.Millisecond {
		t.Errorf("budget %+v, WatchStock bulkhead %+v", p.Budget, watch.Bulkhead)
	}
	// The annotated literal is left as it was.
	if inventory.Methods[0].Timeout != 300*time.Millisecond {
		t.Errorf("the generated policy was changed: %v", inventory.Methods[0].Timeout)
	}
	if opts := s.Options(payments); len(opts) != 0 {
		t.Errorf("%d options for a service the file does not name", len(opts))
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	env := []string{
		"PATH=/bin",
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__TIMEOUT=50ms",
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__FAILURE_CODES=UNAVAILABLE, RESOURCE_EXHAUSTED",
		"RESILIENT__EXAMPLE_PAYMENTS_V1_PAYMENTSSERVICE__BULKHEAD__PERMITS=4",
	}
	s, err := override.Parse("o.json", []byte(`{"services": {"example.inventory.v1.InventoryService": {"methods": {"GetStock": {"timeout": "1s", "overall_timeout": "2s"}}}}}`),
		env, inventory, payments)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	p := rt.Policy()
	if p.Methods[0].Timeout != 50*time.Millisecond || p.Methods[0].OverallTimeout != 2*time.Second {
		t.Errorf("GetStock timeouts %v %v, want the variable's 50ms and the file's 2s", p.Methods[0].Timeout, p.Methods[0].OverallTimeout)
	}
	if p.Breaker.FailureCodes != policy.CodesOf(codes.Unavailable, codes.ResourceExhausted) {
		t.Errorf("failure codes %v", p.Breaker.FailureCodes)
	}
	pay, err := runtime.NewClient(payments, s.Options(payments)...)
	if err != nil || pay.Policy().Bulkhead.Permits != 4 {
		t.Fatalf("payments: %v", err)
	}
	if got := override.EnvName("example.inventory.v1.InventoryService", "GetStock", "retry.max_attempts"); got != "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS" {
		t.Errorf("EnvName = %s", got)
	}
}

// Describe shows, for each changed value, the annotated one and the key
// it came from.
func TestDescribeNamesTheSourceOfEachValue(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {timeout: 100ms}
`), []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=5s"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	out := build(t, s).Describe()
	for _, want := range []string{
		"/GetStock\n    unary, idempotent: true, idempotency_key: none, timeout: 100ms, overall_timeout: none,",
		`methods.GetStock.timeout: 300ms → 100ms (overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.timeout)`,
		"circuit_breaker.cool_down: 2s → 5s (RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Describe():\n%s\nwant a line with %q", out, want)
		}
	}
	if strings.Contains(out, "ReserveStock.timeout") {
		t.Errorf("Describe lists a value no override changed:\n%s", out)
	}
}

// Every way an override is refused, with the exact key it names.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		want       string
	}{
		{"max attempts zero", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {max_attempts: 0}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.retry.max_attempts: must be at least 1, got 0`},
		{"unknown service", `{services: {example.inventory.v1.Inventory: {timeout: 1s}}}`, nil,
			`overrides.yaml: services."example.inventory.v1.Inventory": unknown service: this program's clients call example.inventory.v1.InventoryService, example.payments.v1.PaymentsService`},
		{"unknown method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStocks: {timeout: 1s}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStocks: unknown method of example.inventory.v1.InventoryService (did you mean GetStock?): its methods are GetStock, ReserveStock, WatchStock`},
		{"unknown field", `{services: {example.inventory.v1.InventoryService: {deadline: 1s}}}`, nil,
			`overrides.yaml: ` + inv + `.deadline: unknown field; the fields are those of the annotation: timeout, overall_timeout, retry,`},
		{"misspelt field", `{services: {example.inventory.v1.InventoryService: {timout: 1s}}}`, nil,
			`overrides.yaml: ` + inv + `.timout: unknown field (did you mean timeout?); the fields are those of the annotation: timeout,`},
		{"field without its underscore", `{services: {example.inventory.v1.InventoryService: {circuit_breaker: {cooldown: 1s}}}}`, nil,
			`overrides.yaml: ` + inv + `.circuit_breaker.cooldown: unknown field (did you mean cool_down?); the fields are those of the annotation:`},
		{"camel case field", `{services: {example.inventory.v1.InventoryService: {retry: {maxAttempts: 2}}}}`, nil,
			`overrides.yaml: ` + inv + `.retry.maxAttempts: unknown field (did you mean max_attempts?)`},
		{"unknown top-level key", `{service: {}}`, nil, `overrides.yaml: service: unknown key: the file holds only services`},
		{"bad duration", `{services: {example.inventory.v1.InventoryService: {timeout: fast}}}`, nil,
			`overrides.yaml: ` + inv + `.timeout: not a duration: "fast"; write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`},
		{"duration without unit", `{services: {example.inventory.v1.InventoryService: {timeout: 5}}}`, nil,
			`overrides.yaml: ` + inv + `.timeout: not a duration: "5"; write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`},
		{"negative duration", `{services: {example.inventory.v1.InventoryService: {circuit_breaker: {cool_down: -1s}}}}`, nil,
			`overrides.yaml: ` + inv + `.circuit_breaker.cool_down: must be positive, got -1s; remove this override to keep the annotated value`},
		{"ratio out of range", `{services: {example.inventory.v1.InventoryService: {retry_budget: {ratio: 1.5}}}}`, nil,
			`overrides.yaml: ` + inv + `.retry_budget.ratio: must be in (0, 1], got 1.5`},
		{"permits zero", `{services: {example.inventory.v1.InventoryService: {bulkhead: {permits: 0}}}}`, nil,
			`overrides.yaml: ` + inv + `.bulkhead.permits: must be at least 1, got 0`},
		{"negative count", `{services: {example.inventory.v1.InventoryService: {bulkhead: {permits: -3}}}}`, nil,
			`overrides.yaml: ` + inv + `.bulkhead.permits: must be a whole number from 0 to 4294967295, written in decimal digits as 3 (no sign, point, exponent, "_", leading zero or 0x), got "-3"`},
		{"unknown code", `{services: {example.inventory.v1.InventoryService: {retry: {retryable_codes: [UNAVAILABLE, Unavailable]}}}}`, nil,
			`overrides.yaml: ` + inv + `.retry.retryable_codes[1]: unknown status code "Unavailable": did you mean "UNAVAILABLE"?`},
		{"answer retried", `{services: {example.inventory.v1.InventoryService: {retry: {retryable_codes: [NOT_FOUND]}}}}`, nil,
			`overrides.yaml: ` + inv + `.retry.retryable_codes[0]: "NOT_FOUND" is an answer of the service`},
		{"codes not a list", `{services: {example.inventory.v1.InventoryService: {retry: {retryable_codes: UNAVAILABLE}}}}`, nil,
			`overrides.yaml: ` + inv + `.retry.retryable_codes: must be a list of status code names`},
		{"budget on a method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry_budget: {ratio: 0.5}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.retry_budget: retry_budget is shared by the whole dependency: set it on the service or the file`},
		{"per_method on the service", `{services: {example.inventory.v1.InventoryService: {circuit_breaker: {per_method: true}}}}`, nil,
			`overrides.yaml: ` + inv + `.circuit_breaker.per_method: per_method is only meaningful on a method`},
		{"method breaker without per_method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {circuit_breaker: {cool_down: 1s}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.circuit_breaker.cool_down: the method has no circuit breaker of its own: add circuit_breaker.per_method: true`},
		{"idempotent is the contract", `{services: {example.payments.v1.PaymentsService: {methods: {Charge: {idempotent: true}}}}}`, nil,
			`overrides.yaml: services."example.payments.v1.PaymentsService".methods.Charge.idempotent: idempotent is part of the service's contract, not a setting`},
		{"retry on a method that is not idempotent", `{services: {example.payments.v1.PaymentsService: {methods: {Charge: {retry: {max_attempts: 3}}}}}}`, nil,
			`overrides.yaml: services."example.payments.v1.PaymentsService".methods.Charge.retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)`},
		{"service retry reaching a method that is not idempotent", `{services: {example.payments.v1.PaymentsService: {retry: {initial_backoff: 10ms}}}}`, nil,
			`overrides.yaml: services."example.payments.v1.PaymentsService".retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)`},
		{"retry on a stream", `{services: {example.inventory.v1.InventoryService: {methods: {WatchStock: {retry: {max_attempts: 2}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.WatchStock.retry.max_attempts: streams are not retried, and WatchStock is a streaming method`},
		{"timeout longer than overall", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {overall_timeout: 100ms}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.overall_timeout: in GetStock, timeout 300ms is longer than overall_timeout 100ms: one attempt cannot outlast the whole call`},
		{"backoff upside down", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {initial_backoff: 500ms}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.retry.initial_backoff: in GetStock, max_backoff 200ms is shorter than initial_backoff 500ms: raise max_backoff or lower initial_backoff`},
		{"not YAML", "services: [\n", nil, `overrides.yaml: not valid YAML or JSON`},
		{"env unknown service", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V2_INVENTORYSERVICE__TIMEOUT=1s"},
			`RESILIENT__EXAMPLE_INVENTORY_V2_INVENTORYSERVICE__TIMEOUT: unknown service EXAMPLE_INVENTORY_V2_INVENTORYSERVICE`},
		{"env unknown method", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GET__TIMEOUT=1s"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GET__TIMEOUT: unknown method GET of example.inventory.v1.InventoryService`},
		{"env unknown field", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__ATTEMPTS=2"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__ATTEMPTS: unknown field; the fields are those of the annotation: max_attempts,`},
		{"env group without field", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY=3"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY: retry is a group of settings: name one of its fields after it`},
		{"env bad number", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__MAX_ATTEMPTS=two"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__MAX_ATTEMPTS: must be a whole number from 0 to 4294967295, written in decimal digits as 3 (no sign, point, exponent, "_", leading zero or 0x), got "two"`},
		{"env unsafe value", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS=0"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS: must be at least 1, got 0`},
		{"env retry on a method that is not idempotent", "", []string{"RESILIENT__EXAMPLE_PAYMENTS_V1_PAYMENTSSERVICE__METHODS__CHARGE__RETRY__MAX_ATTEMPTS=2"},
			`RESILIENT__EXAMPLE_PAYMENTS_V1_PAYMENTSSERVICE__METHODS__CHARGE__RETRY: Charge is not idempotent`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("overrides.yaml", []byte(tc.file), tc.env, inventory, payments)
			if err == nil {
				t.Fatalf("accepted (%v), want an error starting %q", s.Keys(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant one containing:\n%s", err, tc.want)
			}
			if s != nil {
				t.Error("a Set was returned with the error")
			}
		})
	}
}

func TestNewBulkheadNeedsPermits(t *testing.T) {
	p := &policy.Service{Name: "t.v1.S", Methods: []policy.Method{{Name: "/t.v1.S/Get", Idempotent: true}}}
	_, err := override.Parse("o.yaml", []byte(`{services: {t.v1.S: {bulkhead: {max_wait: 1s}}}}`), nil, p)
	if want := `o.yaml: services."t.v1.S".bulkhead.permits: is required`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want %s", err, want)
	}
	s, err := override.Parse("o.yaml", []byte(`{services: {t.v1.S: {bulkhead: {permits: 3}, circuit_breaker: {minimum_calls: 5}}}}`), nil, p)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.NewClient(p, s.Options(p)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Policy(); got.Bulkhead.Permits != 3 || got.Breaker.MinimumCalls != 5 || got.Breaker.CoolDown != 10*time.Second {
		t.Errorf("bulkhead %+v breaker %+v: an override adds them from the contract's defaults", got.Bulkhead, got.Breaker)
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	_, err := override.Parse("o.yaml", []byte(`{services: {example.inventory.v1.InventoryService: {timeout: 0s, retry: {max_attempts: 0}, timout: 1s}}}`), nil, inventory)
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("error %v, want three lines", err)
	}
}

func TestLoadReadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overrides.json")
	if err := os.WriteFile(path, []byte(`{"services": {"example.payments.v1.PaymentsService": {"methods": {"Charge": {"timeout": "0.5s"}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := override.Load(path, nil, payments)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(); len(got) != 1 || got[0] != path+`: services."example.payments.v1.PaymentsService".methods.Charge.timeout` {
		t.Errorf("Keys() = %q", got)
	}
	if _, err := override.Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, payments); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// An override changes behaviour: the annotated 300 ms GetStock timeout,
// shortened to 50 ms by an override, is what a slow server meets.
func TestShorterTimeoutSeenAgainstSlowServer(t *testing.T) {
	srv, err := server.Start("127.0.0.1:0", server.Slow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := override.Parse("overrides.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {timeout: 50ms, retry: {max_attempts: 1}}
`), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	call := func(opts []runtime.Option) (time.Duration, error) {
		client, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		_, err = client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		return time.Since(begin), err
	}
	// The runtime names the limit that cut the call; the server's second
	// bounds the time from above whatever the machine's load.
	took, err := call(s.Options(inventory))
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "timeout of 50ms") ||
		took < 50*time.Millisecond || took >= time.Second {
		t.Errorf("with the override: %v after %v, want DEADLINE_EXCEEDED by the 50ms timeout", err, took)
	}
	took, err = call(nil)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "timeout of 300ms") || took < 300*time.Millisecond {
		t.Errorf("as annotated: %v after %v, want DEADLINE_EXCEEDED by the annotated 300ms", err, took)
	}
}

// A variable of the RESILIENT family that is not spelled as the loader
// reads it is refused with the name it must have, never ignored.
func TestMisspeltVariablesAreRefusedWithTheirName(t *testing.T) {
	const svc = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE"
	for _, tc := range []struct{ name, want string }{
		{"RESILIENT_EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__TIMEOUT",
			"must be named " + svc + "__TIMEOUT"},
		{"resilient__example_inventory_v1_inventoryservice__timeout",
			"must be named " + svc + "__TIMEOUT"},
		{svc + "__METHODS__GetStock__TIMEOUT",
			"must be named " + svc + "__METHODS__GETSTOCK__TIMEOUT"},
		{svc + "__METHODS__GET_STOCK__RETRY__MAX_ATTEMPTS",
			"must be named " + svc + "__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS"},
		{svc + "__RETRY_BUDGET_RATIO",
			"must be named " + svc + "__RETRY_BUDGET__RATIO"},
		{svc + "_CIRCUIT_BREAKER__COOLDOWN",
			"must be named " + svc + "__CIRCUIT_BREAKER__COOL_DOWN"},
		// Spelled wrong and meaning no value: the problem of the name as
		// the loader would read it.
		{"Resilient__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__ATTEMPTS",
			"Resilient__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__ATTEMPTS (read as " + svc +
				"__RETRY__ATTEMPTS): unknown field; the fields are those of the annotation: max_attempts,"},
	} {
		s, err := override.Parse("", nil, []string{tc.name + "=1"}, inventory, payments)
		if err == nil {
			t.Errorf("%s: accepted (%v)", tc.name, s.Keys())
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error\n%v\nwant it to name the variable and contain %q", tc.name, err, tc.want)
		}
	}
	// Other variables are none of the loader's business.
	if _, err := override.Parse("", nil, []string{"PATH=/bin", "RESILIENCE=1", "MY_RESILIENT__X=1"}, inventory); err != nil {
		t.Errorf("a variable outside the family was refused: %v", err)
	}
	// A family member that means nothing known is refused too.
	if _, err := override.Parse("", nil, []string{"RESILIENT_MODE=on"}, inventory); err == nil {
		t.Error("RESILIENT_MODE was ignored")
	}
}

// The audit trail is complete: retries turned off, and a method's own
// breaker given back, are changes like any other.
func TestDescribeShowsRetriesTurnedOff(t *testing.T) {
	s, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {retry: {max_attempts: 1}}
      WatchStock: {bulkhead: {per_method: false}}
`), nil, inventory)
	if err != nil {
		t.Fatal(err)
	}
	rt := build(t, s)
	want := map[string]runtime.Change{
		"methods.GetStock.retry.max_attempts": {Annotated: "3", Value: "1",
			Source: `o.yaml: ` + inv + `.methods.GetStock.retry.max_attempts`},
		"methods.WatchStock.bulkhead.permits": {Annotated: "4", Value: "none",
			Source: `o.yaml: ` + inv + `.methods.WatchStock.bulkhead.per_method`},
	}
	got := map[string]runtime.Change{}
	for _, ch := range rt.Changes() {
		key := ch.Key
		ch.Key = ""
		got[key] = ch
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("change of %s = %+v, want %+v (all: %+v)", k, got[k], w, rt.Changes())
		}
	}
	out := rt.Describe()
	if strings.Contains(out, "every value as annotated") || !strings.Contains(out, "methods.GetStock.retry.max_attempts: 3 → 1 (o.yaml:") {
		t.Errorf("Describe():\n%s\nwant the retries turned off listed", out)
	}
	if !strings.Contains(out, "/GetStock\n    unary, idempotent: true, idempotency_key: none, timeout: 300ms, overall_timeout: none, priority: normal\n    retry: none (max_attempts 1)\n") {
		t.Errorf("Describe():\n%s\nwant GetStock's retry shown as none", out)
	}
}

// A variable that names METHODS of a service without methods is refused,
// not a panic.
func TestMethodsOfAServiceWithoutMethods(t *testing.T) {
	p := &policy.Service{Name: "t.v1.Empty"}
	_, err := override.Parse("", nil, []string{"RESILIENT__T_V1_EMPTY__METHODS=1"}, p)
	if err == nil || !strings.Contains(err.Error(), "name the method after METHODS") {
		t.Fatalf("error %v", err)
	}
}

// The runtime's own default budget is the contract's (rules' table),
// and the contract's defaults fit the runtime's types.
func TestDefaultsFitTheRuntime(t *testing.T) {
	var b policy.Budget
	if err := rules.Fill(&b, rules.DefaultOf("retry_budget")); err != nil || b != policy.DefaultBudget {
		t.Errorf("budget from the table %+v (%v), policy.DefaultBudget %+v", b, err, policy.DefaultBudget)
	}
	for group, dst := range map[string]any{
		"retry": &policy.Retry{}, "circuit_breaker": &policy.Breaker{},
		"hedging": &policy.Hedging{}, "cache": &policy.Cache{},
	} {
		if err := rules.Fill(dst, rules.DefaultOf(group)); err != nil {
			t.Errorf("%s: %v", group, err)
		}
	}
}
