// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18ChecksWrittenIsGo: GroupProblems reads a group as an
// options author writes it (a zero is a written 0), Validate as a Go
// author builds it (a zero is none or the default). For every value but
// zero the two readings are one: for a grid of non-zero extremes of every
// number and duration of every group, set alone in a valid policy, the
// value GroupProblems refuses on its own (not a pair) is the value
// Validate refuses, at the same key, and the value it passes Validate
// passes; and the core GroupProblems gives is inside Validate's message
// (in the options' names, OptionsMessage, where the problem has one; a
// server's, which reaches only a Go author, in Go's names).
// So the plugin, lint and the override loader refuse, value by value,
// what Validate, NewClient and NewGuard refuse.
func TestAttackR18ChecksWrittenIsGo(t *testing.T) {
	ints := []int64{-1, 1, 2, 3, 20, 1 << 20, 1<<20 + 1, 1 << 21, 1<<21 + 1, math.MaxInt32}
	floats := []float64{-1, 0.5, 0.99, 1, 1.5, 2, 1e308, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324}
	durs := []time.Duration{-1, 1, 9, 10, time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 999 * time.Millisecond, time.Second, time.Hour, math.MaxInt64}
	client := func() *policy.Service {
		return &policy.Service{
			Name:           "p.S",
			Budget:         &policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second},
			Breaker:        &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, Window: 10 * time.Second, CoolDown: 5 * time.Second, HalfOpenProbes: 3, FailureCodes: policy.CodesOf(codes.Unavailable)},
			Bulkhead:       &policy.Bulkhead{Permits: 1 << 21, MaxWait: time.Millisecond},
			RateLimit:      &policy.RateLimit{RequestsPerSecond: 10, Burst: 10},
			AdaptiveLimit:  &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 100, InitialLimit: 20, Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: time.Minute},
			ClientThrottle: &policy.Throttle{K: 2, Window: time.Minute, MaxRefusal: 0.9},
			Methods: []policy.Method{{
				Name: "/p.S/Get", Idempotent: true, Timeout: time.Hour, OverallTimeout: 2 * time.Hour,
				Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)},
				Cache: &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1, KeyFields: []string{"id"}},
			}, {
				Name: "/p.S/Put", Idempotent: true, Timeout: time.Hour,
				Hedging: &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2},
			}},
		}
	}
	srv := func() *policy.Server {
		return &policy.Server{
			Name:     "p.S",
			Shedding: &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 1 << 21, High: 1 << 21, Critical: math.MaxInt32}, Pushback: time.Second, Code: codes.Unavailable},
			Methods: []policy.ServerMethod{{Name: "/p.S/Get", MinDeadline: time.Millisecond, DefaultTimeout: 2 * time.Hour,
				Dedup: &policy.Dedup{TTL: time.Hour, Lease: 10 * time.Second}, NewResponse: func() proto.Message { return new(emptypb.Empty) }}},
		}
	}
	type group struct {
		name   string
		server bool
		// at returns the group (a pointer to its struct) in a fresh valid
		// policy, and the problems Validate finds in that policy, by key:
		// a client's as an operator reads them (OptionsMessage), a
		// server's as a Go author does (the only reader of its Validate).
		at func() (g any, problems func() map[string]string)
	}
	clientGroup := func(pick func(p *policy.Service) any) func() (any, func() map[string]string) {
		return func() (any, func() map[string]string) {
			p := client()
			return pick(p), func() map[string]string {
				out := map[string]string{}
				for _, pr := range p.Problems() {
					if !pr.Pair { // a pair of a method's values the options check merged
						out[pr.Key] = pr.OptionsMessage
					}
				}
				return out
			}
		}
	}
	serverGroup := func(pick func(p *policy.Server) any) func() (any, func() map[string]string) {
		return func() (any, func() map[string]string) {
			p := srv()
			return pick(p), func() map[string]string {
				out := map[string]string{}
				if err := p.Validate(); err != nil {
					for _, line := range strings.Split(err.Error(), "\n") {
						// "resilient/server: p.S: Shedding.Limits.Low: …"
						rest := strings.TrimPrefix(line, "resilient/server: p.S: ")
						field, msg, _ := strings.Cut(rest, ": ")
						if i := strings.Index(field, ")."); i >= 0 {
							field = field[i+2:]
						}
						parts := strings.Split(field, ".")
						out[strings.ToLower(parts[len(parts)-1])] = msg
					}
				}
				return out
			}
		}
	}
	groups := []group{
		{"Budget", false, clientGroup(func(p *policy.Service) any { return p.Budget })},
		{"Breaker", false, clientGroup(func(p *policy.Service) any { return p.Breaker })},
		{"Bulkhead", false, clientGroup(func(p *policy.Service) any { return p.Bulkhead })},
		{"RateLimit", false, clientGroup(func(p *policy.Service) any { return p.RateLimit })},
		{"AdaptiveLimit", false, clientGroup(func(p *policy.Service) any { return p.AdaptiveLimit })},
		{"ClientThrottle", false, clientGroup(func(p *policy.Service) any { return p.ClientThrottle })},
		{"Retry", false, clientGroup(func(p *policy.Service) any { return p.Methods[0].Retry })},
		{"Cache", false, clientGroup(func(p *policy.Service) any { return p.Methods[0].Cache })},
		{"Hedging", false, clientGroup(func(p *policy.Service) any { return p.Methods[1].Hedging })},
		{"Shedding", true, serverGroup(func(p *policy.Server) any { return p.Shedding })},
		{"Limits", true, serverGroup(func(p *policy.Server) any { return &p.Shedding.Limits })},
		{"Dedup", true, serverGroup(func(p *policy.Server) any { return p.Methods[0].Dedup })},
		{"ServerMethod", true, serverGroup(func(p *policy.Server) any { return &p.Methods[0] })},
	}
	tried, refused := 0, 0
	for _, g := range groups {
		v, _ := g.at()
		typ := reflect.TypeOf(v).Elem()
		for i := range typ.NumField() {
			f := typ.Field(i)
			var values []any
			switch {
			case f.Type == reflect.TypeOf(time.Duration(0)):
				for _, d := range durs {
					values = append(values, d)
				}
			case f.Type.Kind() == reflect.Int:
				for _, n := range ints {
					values = append(values, n)
				}
			case f.Type.Kind() == reflect.Float64:
				for _, x := range floats {
					values = append(values, x)
				}
			default:
				continue
			}
			for _, x := range values {
				gv, problems := g.at()
				fv := reflect.ValueOf(gv).Elem().Field(i)
				fv.Set(reflect.ValueOf(x).Convert(fv.Type()))
				checked := gv
				if g.name == "Limits" {
					checked = &policy.Shedding{Limits: *gv.(*policy.Limits), Pushback: time.Second, Code: codes.Unavailable}
				}
				written := map[string]string{}
				for _, pr := range policy.GroupProblems(checked) {
					if !pr.Pair {
						written[pr.Key] = pr.Core
					}
				}
				inGo := problems()
				tried++
				at := fmt.Sprintf("%s.%s = %v", g.name, f.Name, x)
				option := optionOf(f.Name)
				for key, core := range written {
					if key != option {
						continue // a zero of the valid base, a written 0 to the options
					}
					refused++
					k := key
					if strings.HasPrefix(g.name, "Shedding") || g.name == "Limits" || g.name == "Dedup" || g.name == "ServerMethod" {
						k = strings.ReplaceAll(key, "_", "")
					}
					msg, ok := inGo[k]
					if !ok {
						for gk, m := range inGo {
							if strings.HasSuffix(gk, "."+key) {
								msg, ok = m, true
							}
						}
					}
					switch {
					case !ok:
						t.Errorf("%s: the options refuse %s (%q), Validate does not: %v", at, key, core, inGo)
					case strings.Contains(msg, core):
					case g.server && strings.Contains(msg, inGoNames(core)):
					case x == time.Duration(-1) && (strings.Contains(msg, "must not be negative") || strings.Contains(msg, "shorter than")):
						// A duration whose zero is none in Go: the options,
						// which say none by leaving it out, ask for a
						// positive one.
					default:
						t.Errorf("%s: the options say %q, Validate %q", at, core, msg)
					}
				}
				// What Validate refuses of the value itself, the options refuse.
				for key, msg := range inGo {
					last := key[strings.LastIndex(key, ".")+1:]
					if last != option && last != strings.ReplaceAll(option, "_", "") {
						continue
					}
					if _, ok := written[option]; !ok && !pairOnly(checked, option) {
						t.Errorf("%s: Validate refuses %s (%q), the options accept it", at, key, msg)
					}
				}
			}
		}
	}
	if tried < 300 || refused < 100 {
		t.Fatalf("only %d values tried, %d refused", tried, refused)
	}
}

// inGoNames is core with each option's name in it (a word in snake
// case) written as Go names the field: "on_store_error's case" →
// "OnStoreError's case".
func inGoNames(core string) string {
	return optionWord.ReplaceAllStringFunc(core, contract.GoName)
}

// optionOf is a Go field's option name (CoolDown → cool_down), as the
// problems' keys write it.
func optionOf(goName string) string {
	switch goName {
	case "Multiplier":
		return "backoff_multiplier"
	case "TTL":
		return "ttl"
	case "FreshTTL":
		return "fresh_ttl"
	case "StaleTTL":
		return "stale_ttl"
	case "K":
		return "k"
	}
	var b strings.Builder
	for i, r := range goName {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pairOnly reports whether GroupProblems refuses option of g only as a
// problem of two values (which the options check on merged levels).
func pairOnly(g any, option string) bool {
	for _, pr := range policy.GroupProblems(g) {
		if pr.Pair && strings.HasSuffix("."+pr.Key, "."+option) {
			return true
		}
	}
	return false
}
