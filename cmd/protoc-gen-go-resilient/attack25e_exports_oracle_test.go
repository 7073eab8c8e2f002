// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// a25eMethod is one method of the oracle's proto: its annotation, from
// which the test computes what each export must say, by the README's
// rules, without the plugin's code.
type a25eMethod struct {
	name          string
	keyed         bool          // not idempotent, idempotency_key: "k"
	timeout       time.Duration // per attempt
	overall       time.Duration // 0: none
	attempts      int
	initial, maxB time.Duration
	mult          float64
	codes         []string
}

func a25eDur(d time.Duration) string {
	return fmt.Sprintf("{seconds: %d, nanos: %d}", d/time.Second, d%time.Second)
}

func a25eMethods() []a25eMethod {
	rng := rand.New(rand.NewPCG(25, 'e'))
	us := time.Microsecond
	backoffs := []time.Duration{100 * us, 200 * us, 500 * us, 900 * us, time.Millisecond, 1500 * us, 1900 * us, 10 * time.Millisecond, 50 * time.Millisecond}
	extra := []string{"DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL", "CANCELLED", "ABORTED"}
	var out []a25eMethod
	for i := range 48 {
		m := a25eMethod{
			name:     fmt.Sprintf("M%02d", i),
			keyed:    i%3 == 2,
			timeout:  time.Duration(300+rng.IntN(200000)) * us,
			attempts: 2 + rng.IntN(6),
			mult:     []float64{1.5, 2, 3}[rng.IntN(3)],
			codes:    []string{"UNAVAILABLE"},
		}
		m.initial = backoffs[rng.IntN(len(backoffs))]
		m.maxB = time.Duration(float64(m.initial) * []float64{1, 1.5, 3, 10}[rng.IntN(4)])
		if rng.IntN(2) == 0 {
			m.overall = time.Duration(float64(m.timeout) * []float64{1, 1.7, 2.5, 10}[rng.IntN(4)])
		}
		for _, c := range extra {
			if rng.IntN(3) == 0 {
				m.codes = append(m.codes, c)
			}
		}
		if i%8 == 5 { // retried on its own attempts' timeouts alone
			m.codes = []string{"DEADLINE_EXCEEDED"}
		}
		out = append(out, m)
	}
	return out
}

func a25eProto(ms []a25eMethod) string {
	var b strings.Builder
	b.WriteString(`syntax = "proto3";
package a25e.oracle;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a25e/oracle";
service S {
`)
	for _, m := range ms {
		fmt.Fprintf(&b, "  rpc %s(M) returns (M) {\n", m.name)
		opt := ""
		if m.keyed {
			opt = `idempotency_key: "k", `
		} else {
			b.WriteString("    option idempotency_level = NO_SIDE_EFFECTS;\n")
		}
		opt += "timeout: " + a25eDur(m.timeout)
		if m.overall > 0 {
			opt += ", overall_timeout: " + a25eDur(m.overall)
		}
		var qc []string
		for _, c := range m.codes {
			qc = append(qc, `"`+c+`"`)
		}
		opt += fmt.Sprintf(", retry: {max_attempts: %d, initial_backoff: %s, max_backoff: %s, backoff_multiplier: %g, retryable_codes: [%s]}",
			m.attempts, a25eDur(m.initial), a25eDur(m.maxB), m.mult, strings.Join(qc, ", "))
		fmt.Fprintf(&b, "    option (resilient.v1.method) = {%s};\n  }\n", opt)
	}
	b.WriteString("}\nmessage M { string k = 1; }\n")
	return b.String()
}

func ceilMs(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		return d + time.Millisecond - r
	}
	return d
}

// envoyReads is a back-off as Envoy reads base_interval and max_interval:
// whole milliseconds, truncated, and 1ms at least.
func envoyReads(d time.Duration) time.Duration {
	return max(d.Truncate(time.Millisecond), time.Millisecond)
}

// a25eOneAttempt is the route timeout of one attempt: the attempt's timeout
// in Envoy's whole milliseconds, never longer than overall_timeout (cut to
// the millisecond below it, 1ms at least).
func a25eOneAttempt(m a25eMethod) time.Duration {
	rt := ceilMs(m.timeout)
	if m.overall > 0 && rt > m.overall {
		rt = max(m.overall.Truncate(time.Millisecond), time.Millisecond)
	}
	return rt
}

type a25eRoute struct {
	Name  string
	Match struct {
		Headers []any
	}
	Route struct {
		Timeout           string
		MaxStreamDuration struct {
			GrpcTimeoutHeaderMax string `yaml:"grpc_timeout_header_max"`
		} `yaml:"max_stream_duration"`
		RetryPolicy *struct {
			RetryOn       string `yaml:"retry_on"`
			NumRetries    int    `yaml:"num_retries"`
			PerTryTimeout string `yaml:"per_try_timeout"`
			RetryBackOff  struct {
				BaseInterval string `yaml:"base_interval"`
				MaxInterval  string `yaml:"max_interval"`
			} `yaml:"retry_back_off"`
		} `yaml:"retry_policy"`
	}
}

func a25eParseDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

// TestAttack25eEnvoyRoutesMatchTheAnnotations generates 48 retried methods
// with random timeouts (sub-millisecond fractions included), overall
// timeouts, attempts, back-offs (below a millisecond, and fractions of
// one) and codes, and checks each route of both Envoy modes against what
// the README's table says, computed here from the annotation: the route
// timeout (the bound with Envoy's back-offs, so that the last attempt runs
// its whole per_try_timeout; overall_timeout cut to the millisecond;
// one attempt for a request without its key, and with
// envoy_retries=client), grpc_timeout_header_max equal to it, num_retries,
// retry_on, per_try_timeout rounded up and only when shorter than the
// route, back-offs as annotated.
func TestAttack25eEnvoyRoutesMatchTheAnnotations(t *testing.T) {
	ms := a25eMethods()
	src := a25eProto(ms)
	for _, mode := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "oracle.proto", src, mode)
		if perr != "" {
			t.Fatalf("%s: %s\n%s", mode, perr, src)
		}
		y := files["a25e/oracle/oracle.envoy.yaml"]
		var doc struct {
			Resources []struct {
				VirtualHosts []struct {
					Routes []a25eRoute
				} `yaml:"virtual_hosts"`
			}
		}
		if err := yaml.Unmarshal([]byte(y), &doc); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		routes := map[string]a25eRoute{}
		for _, r := range doc.Resources[0].VirtualHosts[0].Routes {
			routes[r.Name] = r
		}
		client := strings.Contains(mode, "client")
		for _, m := range ms {
			name := "a25e.oracle.S/" + m.name
			check := func(rname string, retried bool) {
				r, ok := routes[rname]
				if !ok {
					t.Errorf("%s: no route %q", mode, rname)
					return
				}
				at := fmt.Sprintf("%s: route %q (timeout %v, overall %v, %d attempts, back-offs %v..%v ×%g, %v)",
					mode, rname, m.timeout, m.overall, m.attempts, m.initial, m.maxB, m.mult, m.codes)
				rt := a25eParseDur(t, r.Route.Timeout)
				if g := a25eParseDur(t, r.Route.MaxStreamDuration.GrpcTimeoutHeaderMax); g != rt {
					t.Errorf("%s: grpc_timeout_header_max %v, route timeout %v", at, g, rt)
				}
				if !retried {
					if r.Route.RetryPolicy != nil {
						t.Errorf("%s: has a retry_policy", at)
					}
					if want := a25eOneAttempt(m); rt != want {
						t.Errorf("%s: timeout %v, want one attempt's %v", at, rt, want)
					}
					return
				}
				pt := ceilMs(m.timeout)
				base, maxi := envoyReads(m.initial), envoyReads(m.maxB)
				envoyBound := time.Duration(m.attempts) * pt
				for n := 1; n < m.attempts; n++ {
					envoyBound += min(time.Duration(1<<n-1)*base, maxi)
				}
				want := ceilMs(envoyBound)
				if m.overall > 0 {
					want = max(m.overall.Truncate(time.Millisecond), time.Millisecond)
				}
				perTry := pt < rt
				var on []string
				for _, c := range m.codes {
					switch c {
					case "UNAVAILABLE":
						on = append(on, "unavailable", "connect-failure", "refused-stream", "reset")
					case "DEADLINE_EXCEEDED":
						if perTry && (m.overall == 0 || m.timeout < m.overall) {
							on = append(on, "gateway-error")
						}
					case "RESOURCE_EXHAUSTED", "INTERNAL", "CANCELLED":
						on = append(on, strings.ToLower(strings.ReplaceAll(c, "_", "-")))
					}
				}
				if len(on) == 0 {
					// Retried only on DEADLINE_EXCEEDED, and no attempt
					// timeout of its own at Envoy: nothing to retry on.
					if rp := r.Route.RetryPolicy; rp != nil {
						t.Errorf("%s: retry_policy %+v, want none: nothing Envoy can retry on", at, *rp)
					}
					if rt != want {
						t.Errorf("%s: timeout %v, want %v", at, rt, want)
					}
					return
				}
				rp := r.Route.RetryPolicy
				if rp == nil {
					t.Errorf("%s: no retry_policy", at)
					return
				}
				if rt != want {
					t.Errorf("%s: timeout %v, want %v (Envoy's attempts of %v and back-offs from %v up to %v, as it reads them: %v)", at, rt, want, pt, base, maxi, envoyBound)
				}
				if rp.NumRetries != m.attempts-1 {
					t.Errorf("%s: num_retries %d, want %d", at, rp.NumRetries, m.attempts-1)
				}
				if b := a25eParseDur(t, rp.RetryBackOff.BaseInterval); b != m.initial {
					t.Errorf("%s: base_interval %v, want %v", at, b, m.initial)
				}
				if b := a25eParseDur(t, rp.RetryBackOff.MaxInterval); b != m.maxB {
					t.Errorf("%s: max_interval %v, want %v", at, b, m.maxB)
				}
				if got := rp.PerTryTimeout != ""; got != perTry {
					t.Errorf("%s: per_try_timeout %q written %v, want %v", at, rp.PerTryTimeout, got, perTry)
				} else if perTry && a25eParseDur(t, rp.PerTryTimeout) != pt {
					t.Errorf("%s: per_try_timeout %s, want %v", at, rp.PerTryTimeout, pt)
				}
				got := strings.Split(rp.RetryOn, ",")
				slices.Sort(got)
				slices.Sort(on)
				if !slices.Equal(got, on) {
					t.Errorf("%s: retry_on %v, want %v", at, got, on)
				}
			}
			switch {
			case client:
				check(name, false)
			case m.keyed:
				check(name+" with idempotency-key", true)
				check(name, false)
			default:
				check(name, true)
			}
		}
	}
}

// TestAttack25eServiceConfigMatchesTheAnnotations: the same methods in the
// gRPC service config: an idempotent method's timeout is its
// overall_timeout, or attempts × timeout and the runtime's back-off
// bounds; maxAttempts at most 5; the back-offs and multiplier as
// annotated; the codes less DEADLINE_EXCEEDED. A keyed one: no
// retryPolicy, the timeout of one attempt (the shorter of timeout and
// overall_timeout).
func TestAttack25eServiceConfigMatchesTheAnnotations(t *testing.T) {
	ms := a25eMethods()
	files, perr := attackProto(t, "oracle.proto", a25eProto(ms), "service_config=true")
	if perr != "" {
		t.Fatal(perr)
	}
	var sc struct {
		MethodConfig []struct {
			Name        []struct{ Service, Method string }
			Timeout     string
			RetryPolicy *struct {
				MaxAttempts          int
				InitialBackoff       string
				MaxBackoff           string
				BackoffMultiplier    float64
				RetryableStatusCodes []string
			}
			HedgingPolicy any
		}
	}
	if err := json.Unmarshal([]byte(files["a25e/oracle/oracle.service_config.json"]), &sc); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, mc := range sc.MethodConfig {
		byName[mc.Name[0].Method] = i
	}
	for _, m := range ms {
		i, ok := byName[m.name]
		if !ok {
			t.Errorf("%s: no methodConfig", m.name)
			continue
		}
		mc := sc.MethodConfig[i]
		at := fmt.Sprintf("%s (keyed %v, timeout %v, overall %v, %d attempts, back-offs %v..%v ×%g, %v)",
			m.name, m.keyed, m.timeout, m.overall, m.attempts, m.initial, m.maxB, m.mult, m.codes)
		got := a25eParseDur(t, mc.Timeout)
		onlyOwnTimeout := slices.Equal(m.codes, []string{"DEADLINE_EXCEEDED"})
		if m.keyed || onlyOwnTimeout {
			want := m.timeout
			if m.overall > 0 {
				want = min(want, m.overall)
			}
			if mc.RetryPolicy != nil || mc.HedgingPolicy != nil {
				t.Errorf("%s: repeated by the service config", at)
			}
			if got != want {
				t.Errorf("%s: timeout %v, want one attempt's %v", at, got, want)
			}
			continue
		}
		want := m.overall
		if want == 0 {
			want = time.Duration(m.attempts) * m.timeout
			// Each backoff at 1.2 × its bound, as grpc-go draws it.
			b := float64(m.initial + m.initial/5)
			maxB := m.maxB + m.maxB/5
			for n := 1; n < m.attempts; n++ {
				want += min(time.Duration(b), maxB)
				b *= m.mult
			}
		}
		// The JSON says microseconds: allow the rounding of the last one.
		if got < want || got > want+time.Microsecond {
			t.Errorf("%s: timeout %v, want %v", at, got, want)
		}
		rp := mc.RetryPolicy
		if rp == nil {
			t.Errorf("%s: no retryPolicy", at)
			continue
		}
		if rp.MaxAttempts != min(m.attempts, 5) {
			t.Errorf("%s: maxAttempts %d, want %d", at, rp.MaxAttempts, min(m.attempts, 5))
		}
		if a25eParseDur(t, rp.InitialBackoff) != m.initial || a25eParseDur(t, rp.MaxBackoff) != m.maxB || rp.BackoffMultiplier != m.mult {
			t.Errorf("%s: back-off %s..%s ×%g", at, rp.InitialBackoff, rp.MaxBackoff, rp.BackoffMultiplier)
		}
		var codes []string
		for _, c := range m.codes {
			if c != "DEADLINE_EXCEEDED" {
				codes = append(codes, c)
			}
		}
		g := slices.Clone(rp.RetryableStatusCodes)
		slices.Sort(g)
		slices.Sort(codes)
		if !slices.Equal(g, codes) {
			t.Errorf("%s: retryableStatusCodes %v, want %v", at, g, codes)
		}
	}
}

// TestAttack25eDocsMatchTheAnnotations: the same methods on the policy
// page: each value in force as an override writes it, from the method,
// and the sentence on the exports for a method retried only with its key.
func TestAttack25eDocsMatchTheAnnotations(t *testing.T) {
	ms := a25eMethods()
	files, perr := attackProto(t, "oracle.proto", a25eProto(ms), "docs=true")
	if perr != "" {
		t.Fatal(perr)
	}
	page := files["a25e/oracle/oracle.policy.md"]
	number := map[string]int{"CANCELLED": 1, "DEADLINE_EXCEEDED": 4, "RESOURCE_EXHAUSTED": 8, "ABORTED": 10, "INTERNAL": 13, "UNAVAILABLE": 14}
	for _, m := range ms {
		start := strings.Index(page, "\n### "+m.name+"\n")
		if start < 0 {
			t.Errorf("%s: no section", m.name)
			continue
		}
		sec := page[start+1:]
		if end := strings.Index(sec[4:], "\n### "); end >= 0 {
			sec = sec[:end+4]
		}
		codes := slices.Clone(m.codes)
		slices.SortFunc(codes, func(a, b string) int { return number[a] - number[b] })
		overall := "none"
		if m.overall > 0 {
			overall = m.overall.String()
		}
		p := "| `methods." + m.name + "."
		rows := []string{
			p + "timeout` | " + m.timeout.String() + " | method |",
			p + "overall_timeout` | " + overall + " | " + map[bool]string{true: "method", false: "default"}[m.overall > 0] + " |",
			p + fmt.Sprintf("retry.max_attempts` | %d | method |", m.attempts),
			p + "retry.initial_backoff` | " + m.initial.String() + " | method |",
			p + "retry.max_backoff` | " + m.maxB.String() + " | method |",
			p + fmt.Sprintf("retry.backoff_multiplier` | %g | method |", m.mult),
			p + "retry.retryable_codes` | [" + strings.Join(codes, ", ") + "] | method |",
		}
		if m.keyed {
			rows = append(rows, p+"idempotent` | false | default |", p+"idempotency_key` | k | method |")
		} else {
			rows = append(rows, p+"idempotent` | true | `idempotency_level = NO_SIDE_EFFECTS` |")
		}
		for _, row := range rows {
			if !strings.Contains(sec, row+"\n") {
				t.Errorf("%s: no row %q in:\n%s", m.name, row, sec)
			}
		}
		if got := strings.Contains(sec, "Retried by the exports only with its key"); got != m.keyed {
			t.Errorf("%s (keyed %v): says it is retried by the exports only with its key: %v", m.name, m.keyed, got)
		}
	}
}
