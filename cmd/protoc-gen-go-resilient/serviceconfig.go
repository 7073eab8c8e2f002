// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The gRPC service config (gRFC A6 and grpc/service_config.proto), in its
// JSON form, as far as this plugin writes it. Field order is the order of
// the JSON.
type (
	serviceConfig struct {
		MethodConfig    []methodConfig   `json:"methodConfig,omitempty"`
		RetryThrottling *retryThrottling `json:"retryThrottling,omitempty"`
	}
	methodConfig struct {
		Name          []methodName     `json:"name"`
		Timeout       string           `json:"timeout,omitempty"`
		RetryPolicy   *scRetryPolicy   `json:"retryPolicy,omitempty"`
		HedgingPolicy *scHedgingPolicy `json:"hedgingPolicy,omitempty"`
	}
	scHedgingPolicy struct {
		MaxAttempts         int      `json:"maxAttempts"`
		HedgingDelay        string   `json:"hedgingDelay"`
		NonFatalStatusCodes []string `json:"nonFatalStatusCodes"`
	}
	methodName struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}
	scRetryPolicy struct {
		MaxAttempts          int      `json:"maxAttempts"`
		InitialBackoff       string   `json:"initialBackoff"`
		MaxBackoff           string   `json:"maxBackoff"`
		BackoffMultiplier    float64  `json:"backoffMultiplier"`
		RetryableStatusCodes []string `json:"retryableStatusCodes"`
	}
	retryThrottling struct {
		MaxTokens  int     `json:"maxTokens"`
		TokenRatio float64 `json:"tokenRatio"`
	}
)

// grpcMaxAttempts is the most attempts gRPC makes, whatever a service config
// asks for (gRFC A6: larger values are treated as 5). The plugin writes the
// smaller of the annotation and this, so that the file says what happens.
const grpcMaxAttempts = 5

// grpcMaxTokens is the largest maxTokens gRPC accepts in retryThrottling.
const grpcMaxTokens = 1000

// serviceConfigJSON renders the gRPC service config of every service of f:
// one methodConfig per method that has a timeout or retries, and the
// retryThrottling of the retry budget. The mapping is the README's
// "Export: gRPC service config".
func serviceConfigJSON(f *protogen.File, services []*service) ([]byte, error) {
	var sc serviceConfig
	for i, s := range f.Services {
		sp := &services[i].Policy
		for j, m := range s.Methods {
			mp := &sp.Methods[j]
			mc := methodConfig{Name: []methodName{{Service: string(s.Desc.FullName()), Method: string(m.Desc.Name())}}}
			// A method that is safe to repeat only with its idempotency key
			// gets neither retries nor hedging: a service config cannot make
			// a retry depend on a header, and a caller that loads it need not
			// send the key. Its timeout is then that of one attempt.
			//
			// So is a method retried only on DEADLINE_EXCEEDED: it gets no
			// retryPolicy (see grpcRepeatable), and a caller that loads the
			// file makes one attempt, which the generated client would cut
			// at the attempt's timeout, not at the bound of all its attempts.
			if !repeatableWithoutKey(mp) || retriedOnlyOnItsOwnTimeout(mp) {
				mp = oneAttempt(mp)
			}
			if d := grpcBound(mp); d > 0 {
				mc.Timeout = seconds(d)
			}
			if r := mp.Retry; r != nil && grpcRepeatable(r.RetryableCodes) != 0 {
				mc.RetryPolicy = &scRetryPolicy{
					MaxAttempts:          min(r.MaxAttempts, grpcMaxAttempts),
					InitialBackoff:       seconds(r.InitialBackoff),
					MaxBackoff:           seconds(r.MaxBackoff),
					BackoffMultiplier:    r.Multiplier,
					RetryableStatusCodes: codeNames(grpcRepeatable(r.RetryableCodes)),
				}
			}
			// gRPC takes a retry policy or a hedging policy, not both; a
			// hedged method's copies are its attempts.
			if h := mp.Hedging; h != nil {
				mc.RetryPolicy = nil
				mc.HedgingPolicy = &scHedgingPolicy{
					MaxAttempts:         min(h.MaxCopies, grpcMaxAttempts),
					HedgingDelay:        seconds(h.Delay),
					NonFatalStatusCodes: codeNames(grpcRepeatable(h.NonFatalCodes)),
				}
				if d := hedgedBound(mp); d > 0 {
					mc.Timeout = seconds(d)
				}
			}
			if mc.Timeout == "" && mc.RetryPolicy == nil && mc.HedgingPolicy == nil {
				continue
			}
			sc.MethodConfig = append(sc.MethodConfig, mc)
		}
		if sp.Budget != nil {
			sc.RetryThrottling = tighter(sc.RetryThrottling, throttlingOf(sp.Budget))
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sc); err != nil {
		return nil, fmt.Errorf("protoc-gen-go-resilient: writing the service config of %s: %w", f.Desc.Path(), err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// grpcBound is the longest a call of mp runs when a gRPC client makes
// its attempts by the exported retryPolicy: the generated client's bound
// (bound.Call) with each backoff counted at 1.2 times its bound. gRPC's
// specification draws a backoff below the bound, as the generated client
// does, but grpc-go draws it from 0.8 to 1.2 times the bound (stream.go,
// shouldRetry): counted at the bound, the timeout cut a grpc-go caller's
// last attempt before it could answer
// (TestAttack27HGrpcGoBackoffIsNotFullJitter).
func grpcBound(mp *policy.Method) time.Duration {
	if mp.Retry == nil || mp.Hedging != nil {
		return bound.Call(mp)
	}
	c, r := *mp, *mp.Retry
	r.InitialBackoff, r.MaxBackoff = grpcJitterTop(r.InitialBackoff), grpcJitterTop(r.MaxBackoff)
	c.Retry = &r
	return bound.Call(&c)
}

// grpcJitterTop is 1.2 × d, the longest grpc-go waits for a backoff of
// bound d, at most the longest Duration.
func grpcJitterTop(d time.Duration) time.Duration {
	if d > math.MaxInt64/6*5 {
		return math.MaxInt64
	}
	return d + d/5
}

// hedgedBound is the longest a hedged call of mp runs when a gRPC client
// sends its copies by the exported hedgingPolicy: the generated client's
// bound (bound.Call) of the copies gRPC sends, at most grpcMaxAttempts.
// gRPC's timeout bounds the whole call, so a copy's timeout alone would
// cut the later copies the generated client lets answer.
func hedgedBound(mp *policy.Method) time.Duration {
	c, h := *mp, *mp.Hedging
	h.MaxCopies = min(h.MaxCopies, grpcMaxAttempts)
	c.Hedging = &h
	return bound.Call(&c)
}

// throttlingOf maps a retry budget onto gRPC's retry throttling, a token
// bucket per channel: it starts full at maxTokens, every failed attempt
// takes a token, every success gives back tokenRatio, and no retry is made
// while half the tokens or fewer are left. So:
//
//   - tokenRatio = ratio: each request that succeeds earns ratio of a
//     retry, as the budget allows ratio retries per request;
//   - maxTokens = 2 × min_retries: about min_retries failures go by before
//     retries stop when nothing succeeds, as the budget's floor allows
//     min_retries retries (at least 1 token, at most gRPC's 1000).
//
// The budget's window has no equivalent: the bucket remembers until
// successes refill it.
func throttlingOf(b *policy.Budget) *retryThrottling {
	ratio := math.Round(b.Ratio*1000) / 1000 // gRPC keeps three decimals
	return &retryThrottling{
		// Halved bound first: 2 × a MinRetries near the largest int
		// would wrap to a negative number, and so to 1 token.
		MaxTokens:  max(2*min(b.MinRetries, grpcMaxTokens/2), 1),
		TokenRatio: max(ratio, 0.001),
	}
}

// tighter keeps, of two services' throttling, the stricter value of each
// field: gRPC has one throttling per channel, and a file's services may be
// served on one.
func tighter(a, b *retryThrottling) *retryThrottling {
	if a == nil {
		return b
	}
	return &retryThrottling{MaxTokens: min(a.MaxTokens, b.MaxTokens), TokenRatio: min(a.TokenRatio, b.TokenRatio)}
}

// grpcRepeatable are the codes of cs after which a gRPC client loading the
// service config may repeat a call as the generated client does: all but
// DEADLINE_EXCEEDED. The generated client repeats after it only when the
// attempt's own timeout expired, which gRPC does not have; the
// DEADLINE_EXCEEDED gRPC would repeat after is the server's own (it gave
// up on something below it), which the generated client never repeats.
func grpcRepeatable(cs policy.CodeSet) policy.CodeSet {
	return cs &^ policy.CodesOf(codes.DeadlineExceeded)
}

// retriedOnlyOnItsOwnTimeout reports whether mp's only repeats are
// retries after DEADLINE_EXCEEDED, which a gRPC client loading the service
// config cannot make as the generated client does: the method is then
// exported as one attempt.
func retriedOnlyOnItsOwnTimeout(mp *policy.Method) bool {
	return mp.Hedging == nil && mp.Retry != nil && grpcRepeatable(mp.Retry.RetryableCodes) == 0
}

// codeNames spells the codes of a set by their canonical names
// ("UNAVAILABLE"), in the order of their numbers.
func codeNames(cs policy.CodeSet) []string {
	out := []string{}
	for _, c := range cs.Codes() {
		out = append(out, codename.Of(c))
	}
	return out
}
