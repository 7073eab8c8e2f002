package runtime

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

func validPolicy() *policy.Service {
	return &policy.Service{
		Name:     "example.inventory.v1.InventoryService",
		Budget:   &policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second},
		Breaker:  &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: 10 * time.Second, CoolDown: 5 * time.Second, HalfOpenProbes: 3, FailureCodes: policy.CodesOf(codes.Unavailable)},
		Bulkhead: &policy.Bulkhead{Permits: 10, MaxWait: 50 * time.Millisecond},
		Methods: []policy.Method{
			{
				Name:           "/example.inventory.v1.InventoryService/GetItem",
				Idempotent:     true,
				Timeout:        200 * time.Millisecond,
				OverallTimeout: time.Second,
				Retry:          &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)},
			},
			{
				Name:           "/example.inventory.v1.InventoryService/Reserve",
				IdempotencyKey: "reservation_id",
				Retry:          &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)},
				Breaker:        &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)},
				Bulkhead:       &policy.Bulkhead{Permits: 1},
			},
			{
				Name:  "/example.inventory.v1.InventoryService/Watch",
				Kind:  policy.KindServerStreaming,
				Retry: &policy.Retry{MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1},
			},
			{Name: "/example.inventory.v1.InventoryService/Cancel"}, // no policy at all
		},
	}
}

func TestValidateValidPolicy(t *testing.T) {
	if err := validPolicy().Validate(); err != nil {
		t.Fatalf("valid policy refused: %v", err)
	}
	minimal := &policy.Service{Name: "pkg.S"}
	if err := minimal.Validate(); err != nil {
		t.Fatalf("minimal policy refused: %v", err)
	}
}

const get = "Methods[0] (/example.inventory.v1.InventoryService/GetItem)"
const reserve = "Methods[1] (/example.inventory.v1.InventoryService/Reserve)"
const watch = "Methods[2] (/example.inventory.v1.InventoryService/Watch)"

func TestValidateRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *policy.Service)
		field  string // the field named in the one error
	}{
		{"empty name", func(p *policy.Service) { p.Name = "" }, "Name"},

		{"budget ratio 0", func(p *policy.Service) { p.Budget.Ratio = 0 }, "Budget.Ratio"},
		{"budget ratio above 1", func(p *policy.Service) { p.Budget.Ratio = 1.5 }, "Budget.Ratio"},
		{"budget ratio NaN", func(p *policy.Service) { p.Budget.Ratio = math.NaN() }, "Budget.Ratio"},
		{"budget min retries negative", func(p *policy.Service) { p.Budget.MinRetries = -1 }, "Budget.MinRetries"},
		{"budget window zero", func(p *policy.Service) { p.Budget.Window = 0 }, "Budget.Window"},

		{"breaker ratio negative", func(p *policy.Service) { p.Breaker.FailureRatio = -0.5 }, "Breaker.FailureRatio"},
		{"breaker ratio above 1", func(p *policy.Service) { p.Breaker.FailureRatio = 1.01 }, "Breaker.FailureRatio"},
		{"breaker minimum calls", func(p *policy.Service) { p.Breaker.MinimumCalls = 0 }, "Breaker.MinimumCalls"},
		{"breaker window negative", func(p *policy.Service) { p.Breaker.Window = -time.Second }, "Breaker.Window"},
		{"breaker cool-down zero", func(p *policy.Service) { p.Breaker.CoolDown = 0 }, "Breaker.CoolDown"},
		{"breaker probes", func(p *policy.Service) { p.Breaker.HalfOpenProbes = 0 }, "Breaker.HalfOpenProbes"},
		{"breaker slow threshold", func(p *policy.Service) { p.Breaker.SlowCallThreshold = -time.Millisecond }, "Breaker.SlowCallThreshold"},
		{"breaker no failure codes", func(p *policy.Service) { p.Breaker.FailureCodes = 0 }, "Breaker.FailureCodes"},
		{"breaker failure codes hold OK", func(p *policy.Service) { p.Breaker.FailureCodes |= policy.CodesOf(codes.OK) }, "Breaker.FailureCodes"},

		{"bulkhead permits", func(p *policy.Service) { p.Bulkhead.Permits = 0 }, "Bulkhead.Permits"},
		{"bulkhead max wait", func(p *policy.Service) { p.Bulkhead.MaxWait = -time.Millisecond }, "Bulkhead.MaxWait"},

		{"method name empty", func(p *policy.Service) { p.Methods[3].Name = "" }, "Methods[3] ().Name"},
		{"method name twice", func(p *policy.Service) { p.Methods[3].Name = p.Methods[0].Name }, "Methods[3] (/example.inventory.v1.InventoryService/GetItem).Name"},
		{"timeout negative", func(p *policy.Service) { p.Methods[0].Timeout = -time.Second }, get + ".Timeout"},
		{"overall timeout negative", func(p *policy.Service) { p.Methods[1].OverallTimeout = -time.Second }, reserve + ".OverallTimeout"},
		{"timeout longer than overall", func(p *policy.Service) { p.Methods[0].Timeout = 2 * time.Second }, get + ".Timeout"},

		{"max attempts", func(p *policy.Service) { p.Methods[0].Retry.MaxAttempts = 0 }, get + ".Retry.MaxAttempts"},
		{"initial backoff", func(p *policy.Service) { p.Methods[0].Retry.InitialBackoff = 0 }, get + ".Retry.InitialBackoff"},
		{"max backoff below initial", func(p *policy.Service) { p.Methods[0].Retry.MaxBackoff = time.Millisecond }, get + ".Retry.MaxBackoff"},
		{"multiplier below 1", func(p *policy.Service) { p.Methods[0].Retry.Multiplier = 0.5 }, get + ".Retry.Multiplier"},
		{"multiplier NaN", func(p *policy.Service) { p.Methods[0].Retry.Multiplier = math.NaN() }, get + ".Retry.Multiplier"},
		{"multiplier infinite", func(p *policy.Service) { p.Methods[0].Retry.Multiplier = math.Inf(1) }, get + ".Retry.Multiplier"},
		{"retryable codes hold OK", func(p *policy.Service) { p.Methods[0].Retry.RetryableCodes |= policy.CodesOf(codes.OK) }, get + ".Retry.RetryableCodes"},
		{"retry of a non-idempotent method", func(p *policy.Service) { p.Methods[1].IdempotencyKey = "" }, reserve + ".Retry"},
		{"retry of a stream", func(p *policy.Service) { p.Methods[2].Retry.MaxAttempts = 2; p.Methods[2].Idempotent = true }, watch + ".Retry"},

		{"method breaker", func(p *policy.Service) { p.Methods[1].Breaker.CoolDown = 0 }, reserve + ".Breaker.CoolDown"},
		{"method bulkhead", func(p *policy.Service) { p.Methods[1].Bulkhead.Permits = -1 }, reserve + ".Bulkhead.Permits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPolicy()
			tc.change(p)
			err := p.Validate()
			if err == nil {
				t.Fatal("Validate accepted the policy")
			}
			errs := err.(interface{ Unwrap() []error }).Unwrap()
			if len(errs) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(errs), err)
			}
			want := "resilient: policy " + p.Name + ": " + tc.field + ": "
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %q does not name the field: want prefix %q", err, want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	p := validPolicy()
	p.Budget.Ratio = 2
	p.Breaker.HalfOpenProbes = 0
	p.Bulkhead.MaxWait = -1
	p.Methods[0].Retry.Multiplier = 0
	p.Methods[0].Retry.MaxAttempts = 0
	p.Methods[1].IdempotencyKey = ""
	p.Methods[2].OverallTimeout = -1
	err := p.Validate()
	if err == nil {
		t.Fatal("Validate accepted the policy")
	}
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		_, rest, _ := strings.Cut(e.Error(), p.Name+": ")
		field, _, _ := strings.Cut(rest, ": ")
		fields = append(fields, field)
	}
	want := []string{
		"Budget.Ratio",
		"Breaker.HalfOpenProbes",
		"Bulkhead.MaxWait",
		get + ".Retry.MaxAttempts",
		get + ".Retry.Multiplier",
		reserve + ".Retry",
		watch + ".OverallTimeout",
	}
	if strings.Join(fields, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fields named:\n%s\nwant:\n%s", strings.Join(fields, "\n"), strings.Join(want, "\n"))
	}
	if strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Fatalf("error text does not hold one line per problem:\n%v", err)
	}
	if errors.Is(err, ErrCircuitOpen) {
		t.Fatal("a validation error matches a refusal sentinel")
	}
}
