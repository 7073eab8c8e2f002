// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// One mistake, three boundaries: written in a .proto (the plugin), in an
// override file (override.Parse) and in Go (policy.Service.Validate and
// runtime.NewClient), it is refused at each, with the same core wording.

const spineProto = `syntax = "proto3";
package attack.spine;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/spine";
message Req { string id = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {bulkhead: {permits: 4} %s};
  rpc M(Req) returns (Resp) {
    option (resilient.v1.method) = {%s};
  }
}
`

// spineBase is the policy the plugin resolves from spineProto with the
// method idempotent and a timeout of 1s: the Go side of the same service.
func spineBase() *policy.Service {
	return &policy.Service{
		Name:     "attack.spine.S",
		Bulkhead: &policy.Bulkhead{Permits: 4},
		Methods: []policy.Method{{
			Name: "/attack.spine.S/M", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second,
		}},
	}
}

func spineRetry() *policy.Retry {
	return &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second,
		Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

type spineCase struct {
	name string
	// svc and method are the options of the .proto's service and method
	// (method: after "idempotent: true, timeout: {seconds: 1}" unless
	// bare).
	svc, method string
	bare        bool
	// yaml is the override of the service, under services."attack.spine.S".
	yaml string
	// edit makes the same mistake in Go.
	edit func(p *policy.Service)
	// core is said by every boundary's refusal; goCore, when set, is
	// core as the Go boundaries (Validate, NewClient) say it, where it
	// names another value: in Go's names ("than Timeout 1s").
	core, goCore []string
	// differs, when set, says why the wording (or, for what is
	// accepted, the verdict) differs between the boundaries by design:
	// the values are not the same thing there (a Go zero means none,
	// where a .proto or an override leaves the option out), or the
	// override loader refuses the value before the rules see it. The
	// refusal at each boundary is still checked, the wording (core) is
	// not.
	differs string
}

var spineCases = []spineCase{{
	name: "max_attempts 0", method: `retry: {max_attempts: 0}`,
	yaml: `methods: {M: {retry: {max_attempts: 0}}}`,
	edit: func(p *policy.Service) { r := spineRetry(); r.MaxAttempts = 0; p.Methods[0].Retry = r },
	core: []string{"must be at least 1, got 0"},
}, {
	name: "multiplier NaN", method: `retry: {backoff_multiplier: nan}`,
	yaml: `methods: {M: {retry: {backoff_multiplier: .nan}}}`,
	edit: func(p *policy.Service) { r := spineRetry(); r.Multiplier = math.NaN(); p.Methods[0].Retry = r },
	core: []string{"finite"},
}, {
	name: "multiplier Inf", method: `retry: {backoff_multiplier: inf}`,
	yaml: `methods: {M: {retry: {backoff_multiplier: .inf}}}`,
	edit: func(p *policy.Service) { r := spineRetry(); r.Multiplier = math.Inf(1); p.Methods[0].Retry = r },
	core: []string{"finite"},
}, {
	name: "rate Inf", method: `rate_limit: {per_method: true, requests_per_second: inf}`,
	yaml: `rate_limit: {requests_per_second: .inf}`,
	edit: func(p *policy.Service) { p.RateLimit = &policy.RateLimit{RequestsPerSecond: math.Inf(1), Burst: 1} },
	core: []string{"finite"},
}, {
	name: "budget ratio NaN", svc: `, retry_budget: {ratio: nan}`,
	yaml: `retry_budget: {ratio: .nan}`,
	edit: func(p *policy.Service) {
		p.Budget = &policy.Budget{Ratio: math.NaN(), MinRetries: 10, Window: time.Second}
	},
	core:    []string{"must be in (0, 1], got NaN"},
	differs: `the plugin and Go say "must be in (0, 1], got NaN", the override loader "must be a finite number written in decimal as 2 or 0.25 (…), got ".nan"" (its number notation, before the rules)`,
}, {
	name: "negative timeout", method: `idempotent: true, timeout: {seconds: -1}`, bare: true,
	yaml:    `methods: {M: {timeout: -1s}}`,
	edit:    func(p *policy.Service) { p.Methods[0].Timeout = -time.Second },
	core:    []string{"must not be negative, got -1s"},
	differs: `the plugin and the override loader say "must be positive, got -1s", Go "must not be negative, got -1s; use 0 for no per-attempt limit"`,
}, {
	name: "zero cool-down", svc: `, circuit_breaker: {cool_down: {}}`,
	yaml: `circuit_breaker: {cool_down: 0s}`,
	edit: func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: time.Second, HalfOpenProbes: 3,
			FailureCodes: policy.CodesOf(codes.Unavailable)}
	},
	core: []string{"must be positive, got 0s"},
}, {
	name: "OK retryable", method: `retry: {retryable_codes: ["OK"]}`,
	yaml: `methods: {M: {retry: {retryable_codes: [OK]}}}`,
	edit: func(p *policy.Service) {
		r := spineRetry()
		r.RetryableCodes = policy.CodesOf(codes.OK)
		p.Methods[0].Retry = r
	},
	core: []string{`"OK" is a success, there is nothing to retry`},
}, {
	name: "answer retryable", method: `retry: {retryable_codes: ["UNAVAILABLE", "NOT_FOUND"]}`,
	yaml: `methods: {M: {retry: {retryable_codes: [UNAVAILABLE, NOT_FOUND]}}}`,
	edit: func(p *policy.Service) {
		r := spineRetry()
		r.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.NotFound)
		p.Methods[0].Retry = r
	},
	core: []string{"NOT_FOUND", "answer", "of the service", "repeating the call cannot change"},
}, {
	name: "answer fails the breaker", svc: `, circuit_breaker: {failure_codes: ["UNAVAILABLE", "INVALID_ARGUMENT"]}`,
	yaml: `circuit_breaker: {failure_codes: [UNAVAILABLE, INVALID_ARGUMENT]}`,
	edit: func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 3,
			FailureCodes: policy.CodesOf(codes.Unavailable, codes.InvalidArgument)}
	},
	core: []string{"INVALID_ARGUMENT", "answer", "never opens the breaker"},
}, {
	name: "hedging beside retries", method: `retry: {}, hedging: {delay: {nanos: 50000000}}`,
	yaml: `methods: {M: {retry: {max_attempts: 3}, hedging: {delay: 50ms}}}`,
	edit: func(p *policy.Service) {
		p.Methods[0].Retry = spineRetry()
		p.Methods[0].Hedging = &policy.Hedging{Delay: 50 * time.Millisecond, MaxCopies: 2}
	},
	core: []string{"hedges or retries"},
}, {
	name: "hedging delay not below timeout", method: `hedging: {delay: {seconds: 2}}`,
	yaml:   `methods: {M: {hedging: {delay: 2s}}}`,
	edit:   func(p *policy.Service) { p.Methods[0].Hedging = &policy.Hedging{Delay: 2 * time.Second, MaxCopies: 2} },
	core:   []string{"is not shorter than timeout 1s"},
	goCore: []string{"is not shorter than Timeout 1s"},
}, {
	name: "cache without timeout", method: `idempotent: true, cache: {fresh_ttl: {seconds: 1}, key_fields: ["id"]}`, bare: true,
	// The override cannot add a cache: the annotation must have one
	// (tested in package override); it can take the timeout away.
	yaml: `methods: {M: {timeout: 0s}}`,
	edit: func(p *policy.Service) {
		p.Methods[0].Timeout = 0
		p.Methods[0].Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10, KeyFields: []string{"id"}}
	},
	core:    []string{"neither timeout nor overall_timeout"},
	differs: `an override cannot take the timeout away (the plugin refuses an explicit 0 too): "timeout: 0s" is refused "must be positive, got 0s", where Go's 0 means no limit and the plugin says "neither timeout nor overall_timeout", Go "neither Timeout nor OverallTimeout"`,
}, {
	name: "timeout longer than overall", method: `overall_timeout: {nanos: 500000000}`,
	yaml:   `methods: {M: {overall_timeout: 500ms}}`,
	edit:   func(p *policy.Service) { p.Methods[0].OverallTimeout = 500 * time.Millisecond },
	core:   []string{"is longer than overall_timeout 500ms"},
	goCore: []string{"is longer than OverallTimeout 500ms"},
}, {
	name: "adaptive max above the bulkhead", svc: `, adaptive_limit: {max_limit: 5}`,
	yaml: `adaptive_limit: {max_limit: 5}`,
	edit: func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: 5} },
	core: []string{"5 is above the bulkhead's 4 permits"},
}, {
	name: "window_calls above the most", svc: `, circuit_breaker: {window_calls: 4000000, minimum_calls: 1}`,
	yaml: `circuit_breaker: {window_calls: 4000000, minimum_calls: 1}`,
	edit: func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, WindowCalls: 4000000, CoolDown: time.Second, HalfOpenProbes: 3,
			FailureCodes: policy.CodesOf(codes.Unavailable)}
	},
	core: []string{"must be in [1, 2097152], got 4000000"},
}, {
	name: "minimum_calls above window_calls", svc: `, circuit_breaker: {window_calls: 10, minimum_calls: 20}`,
	yaml: `circuit_breaker: {window_calls: 10, minimum_calls: 20}`,
	edit: func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, WindowCalls: 10, CoolDown: time.Second, HalfOpenProbes: 3,
			FailureCodes: policy.CodesOf(codes.Unavailable)}
	},
	// One condition, worded for the field each boundary blames: the
	// plugin window_calls, the loader and Go minimum_calls.
	core: []string{"could never", "10", "20"},
}, {
	name: "half-open probes huge", svc: `, circuit_breaker: {half_open_probes: 4000000000}`,
	yaml: `circuit_breaker: {half_open_probes: 4000000000}`,
	edit: func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 4000000000,
			FailureCodes: policy.CodesOf(codes.Unavailable)}
	},
	core: []string{"4000000000"},
}, {
	name: "hedging one copy", method: `hedging: {delay: {nanos: 50000000}, max_copies: 1}`,
	yaml: `methods: {M: {hedging: {delay: 50ms, max_copies: 1}}}`,
	edit: func(p *policy.Service) {
		p.Methods[0].Hedging = &policy.Hedging{Delay: 50 * time.Millisecond, MaxCopies: 1}
	},
	core: []string{"must be at least 2, got 1"},
}, {
	name: "retries of what may not be repeated", method: `timeout: {seconds: 1}, retry: {}`, bare: true,
	yaml: `methods: {M: {retry: {max_attempts: 3}}}`,
	edit: func(p *policy.Service) { p.Methods[0].Retry = spineRetry() },
	core: []string{"not idempotent", "could apply it twice"},
}, {
	name: "adaptive tolerance below 1", svc: `, adaptive_limit: {tolerance: 0.5}`,
	yaml: `adaptive_limit: {tolerance: 0.5}`,
	edit: func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: 0.5} },
	core: []string{"must be a finite number of at least 1, got 0.5"},
}, {
	name: "throttle refusing every call", svc: `, client_throttle: {max_refusal: 1}`,
	yaml: `client_throttle: {max_refusal: 1}`,
	edit: func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{MaxRefusal: 1} },
	core: []string{"must be in (0, 1), got 1"},
}, {
	// Validate accepted Priority(99), which the runtime then silently
	// never sent; fixed: Validate refuses it as the plugin does. An
	// override cannot set a priority at all (the service's contract).
	name: "unknown priority", method: `priority: 99`,
	yaml: `methods: {M: {priority: 99}}`,
	edit: func(p *policy.Service) { p.Methods[0].Priority = 99 },
	core: []string{"priority"},
}}

func TestAttackSpineOneMistakeRefusedAtEveryBoundary(t *testing.T) {
	for _, tc := range spineCases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if !tc.bare {
				method = "idempotent: true, timeout: {seconds: 1}, " + method
			}
			files, plugin := attackProto(t, "spine.proto", fmt.Sprintf(spineProto, tc.svc, method), "")
			if plugin != "" && len(files) != 0 {
				t.Errorf("the plugin refused and still wrote %d files", len(files))
			}
			base := spineBase()
			if tc.name == "retries of what may not be repeated" {
				base.Methods[0].Idempotent = false
			}
			if tc.name == "cache without timeout" {
				base.Methods[0].Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10, KeyFields: []string{"id"}}
			}
			_, oerr := override.Parse("o.yaml", []byte("services:\n  attack.spine.S: {"+tc.yaml+"}\n"), nil, base)
			edited := base.Clone()
			tc.edit(&edited)
			verr := edited.Validate()
			_, nerr := runtime.NewClient(base, runtime.WithPolicy(tc.edit))
			got := map[string]string{"plugin": plugin, "override": errText(oerr), "Validate": errText(verr), "NewClient": errText(nerr)}
			if testing.Verbose() {
				t.Logf("plugin: %s\noverride: %s\nValidate: %s", plugin, errText(oerr), errText(verr))
			}
			for _, b := range []string{"plugin", "override", "Validate", "NewClient"} {
				if got[b] == "" {
					t.Errorf("%s accepts it (the others: %q)", b, got)
				}
			}
			if tc.differs != "" {
				t.Logf("worded differently, by design: %s", tc.differs)
				return
			}
			for _, b := range []string{"plugin", "override", "Validate", "NewClient"} {
				msg, core := got[b], tc.core
				if tc.goCore != nil && (b == "Validate" || b == "NewClient") {
					core = tc.goCore
				}
				for _, c := range core {
					if !strings.Contains(msg, c) {
						t.Errorf("%s's refusal does not say %q:\n%s", b, c, msg)
					}
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// What one boundary accepts, every boundary accepts: the values whose zero
// means something (refuse at once, no slow calls, no retries beyond the
// ratio, no stale answers) and the largest counts.
func TestAttackSpineAcceptedAtEveryBoundary(t *testing.T) {
	for _, tc := range []spineCase{{
		name: "bulkhead max_wait 0", method: `bulkhead: {per_method: true, permits: 2, max_wait: {}}`,
		yaml: `methods: {M: {bulkhead: {per_method: true, permits: 2, max_wait: 0s}}}`,
		edit: func(p *policy.Service) { p.Methods[0].Bulkhead = &policy.Bulkhead{Permits: 2} },
	}, {
		name: "rate limit max_wait 0", method: `rate_limit: {per_method: true, requests_per_second: 10, max_wait: {}}`,
		yaml: `rate_limit: {requests_per_second: 10, max_wait: 0s}`,
		edit: func(p *policy.Service) { p.RateLimit = &policy.RateLimit{RequestsPerSecond: 10, Burst: 10} },
	}, {
		name: "slow_call_threshold 0", svc: `, circuit_breaker: {slow_call_threshold: {}}`,
		differs: "Go's SlowCallThreshold 0 means no slow calls, and is accepted; the plugin and the override loader refuse " +
			"slow_call_threshold: 0s (\"must be positive\"), so an operator cannot turn a threshold off by an override (timeout " +
			"and overall_timeout likewise: 0 is none in Go, refused in a .proto and an override)",
		yaml: `circuit_breaker: {slow_call_threshold: 0s}`,
		edit: func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: time.Second, CoolDown: time.Second, HalfOpenProbes: 3,
				FailureCodes: policy.CodesOf(codes.Unavailable)}
		},
	}, {
		name: "min_retries 0", svc: `, retry_budget: {min_retries: 0}`,
		yaml: `retry_budget: {min_retries: 0}`,
		edit: func(p *policy.Service) { p.Budget = &policy.Budget{Ratio: 0.1, Window: time.Second} },
	}, {
		name: "max_attempts 1", method: `retry: {max_attempts: 1}`,
		yaml: `methods: {M: {retry: {max_attempts: 1}}}`,
		edit: func(p *policy.Service) { r := spineRetry(); r.MaxAttempts = 1; p.Methods[0].Retry = r },
	}, {
		name: "largest counts", svc: `, retry_budget: {min_retries: 4294967295}`,
		method: `retry: {max_attempts: 4294967295}, bulkhead: {per_method: true, permits: 4294967295}`,
		yaml:   `retry_budget: {min_retries: 4294967295}, methods: {M: {retry: {max_attempts: 4294967295}, bulkhead: {per_method: true, permits: 4294967295}}}`,
		edit: func(p *policy.Service) {
			p.Methods[0].Bulkhead = &policy.Bulkhead{Permits: 4294967295}
			p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 4294967295, Window: time.Second}
			r := spineRetry()
			r.MaxAttempts = 4294967295
			p.Methods[0].Retry = r
		},
	}, {
		name: "count window at its most", svc: `, circuit_breaker: {window_calls: 2097152}`,
		yaml: `circuit_breaker: {window_calls: 2097152}`,
		edit: func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, WindowCalls: 2097152, CoolDown: time.Second, HalfOpenProbes: 3,
				FailureCodes: policy.CodesOf(codes.Unavailable)}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			proto := fmt.Sprintf(spineProto, tc.svc, "idempotent: true, timeout: {seconds: 1}, "+tc.method)
			_, plugin := attackProto(t, "spine.proto", proto, "")
			base := spineBase()
			_, oerr := override.Parse("o.yaml", []byte("services:\n  attack.spine.S: {"+tc.yaml+"}\n"), nil, base)
			edited := base.Clone()
			tc.edit(&edited)
			_, nerr := runtime.NewClient(base, runtime.WithPolicy(tc.edit))
			refused := false
			for b, msg := range map[string]string{"plugin": plugin, "override": errText(oerr), "Validate": errText(edited.Validate()), "NewClient": errText(nerr)} {
				if msg != "" {
					refused = true
					if tc.differs == "" {
						t.Errorf("%s refuses what the others accept: %s", b, msg)
					}
				}
			}
			if tc.differs != "" {
				if !refused {
					t.Errorf("accepted everywhere now: remove the note %q", tc.differs)
				}
				t.Logf("accepted at one boundary, refused at another, by design: %s", tc.differs)
			}
		})
	}
}
