// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// optionWord is a word in the options' names (stale_ttl, max_attempts).
var optionWord = regexp.MustCompile(`\b[a-z]+(_[a-z]+)+\b`)

// quoted is a quoted value in a message (a request field's name, a
// header, a code): the author's own text, whatever its case.
var quoted = regexp.MustCompile(`"[^"]*"`)

// optionWordIn returns the first word of msg in the options' names
// outside its quoted values, "" for none.
func optionWordIn(msg string) string {
	return optionWord.FindString(quoted.ReplaceAllString(msg, `""`))
}

// checkReaders checks that pr speaks to each reader in its own names:
// Message, core included, names no value in the options' names (a Go
// author writes StaleTTL and FreshTTL, not stale_ttl and fresh_ttl);
// OptionsMessage holds the core the options boundaries add their mends
// to, and names none of the values it relates by its Go name outside it;
// and neither holds a brace of the template both come from.
func checkReaders(t *testing.T, pr policy.Problem) {
	t.Helper()
	if w := optionWordIn(pr.Message); w != "" {
		t.Errorf("%s: Message %q names %q, an option's name", pr.Field, pr.Message, w)
	}
	optRest, ok := outside(pr.OptionsMessage, pr.Core)
	if !ok {
		t.Errorf("%s: core %q missing from OptionsMessage %q", pr.Field, pr.Core, pr.OptionsMessage)
		return
	}
	for _, key := range append([]string{pr.Key}, pr.With...) {
		for _, part := range strings.Split(key, ".") {
			if g := contract.GoName(part); g != part && regexp.MustCompile(`\b`+g+`\b`).MatchString(optRest) {
				t.Errorf("%s: OptionsMessage %q names %q by its Go name", pr.Field, pr.OptionsMessage, g)
			}
		}
	}
	if strings.ContainsAny(pr.Message+pr.OptionsMessage+pr.Unset, "{}") {
		t.Errorf("%s: a brace left in %q / %q / %q", pr.Field, pr.Message, pr.OptionsMessage, pr.Unset)
	}
}

// outside returns s without its first core, and whether core is in it.
func outside(s, core string) (string, bool) {
	i := strings.Index(s, core)
	if i < 0 {
		return "", false
	}
	return s[:i] + " " + s[i+len(core):], true
}

// TestProblemsSpeakEachReader: a problem whose mend or subject names a
// value says it as Go names the field in Message (Validate,
// runtime.NewClient) and as the options name it in OptionsMessage (the
// override loader), from the one text; Unset, which the options
// boundaries add to their own mend, is in the options' names.
func TestProblemsSpeakEachReader(t *testing.T) {
	get := func(p *policy.Service) *policy.Method { return &p.Methods[0] }
	for _, tc := range []struct {
		name                string
		edit                func(p *policy.Service)
		field               string
		goForm, optionsForm string // the end of Message, of OptionsMessage
		unset               string
	}{
		{"retries on a method not idempotent", func(p *policy.Service) { get(p).Retry, get(p).Idempotent = withRetry(), false },
			"Methods[0] (/p.S/Get).Retry",
			": do not retry it (no Retry, or Retry.MaxAttempts 1)",
			": do not retry it (no retry, or retry.max_attempts: 1)", ""},
		{"hedging a method that retries", func(p *policy.Service) {
			get(p).Hedging, get(p).Retry = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2}, withRetry()
		}, "Methods[0] (/p.S/Get).Hedging",
			"; remove one, or turn retries off for it with Retry.MaxAttempts 1",
			"; remove one, or turn retries off for it with retry.max_attempts: 1", ""},
		{"stale_ttl below fresh_ttl", func(p *policy.Service) {
			get(p).Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Millisecond, MaxEntries: 1}
		}, "Methods[0] (/p.S/Get).Cache.StaleTTL",
			"StaleTTL 1ms is shorter than FreshTTL 1s: an answer is stale only after it stopped being fresh; raise StaleTTL, or set it to FreshTTL for no stale answers",
			"stale_ttl 1ms is shorter than fresh_ttl 1s: an answer is stale only after it stopped being fresh; raise stale_ttl, or set it to fresh_ttl for no stale answers", ""},
		{"timeout above overall_timeout", func(p *policy.Service) { get(p).Timeout = 5 * time.Second },
			"Methods[0] (/p.S/Get).Timeout",
			"Timeout 5s is longer than OverallTimeout 3s: one attempt cannot outlast the whole call; shorten Timeout or lengthen OverallTimeout",
			"timeout 5s is longer than overall_timeout 3s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout", ""},
		{"adaptive limit without timeout", func(p *policy.Service) { p.AdaptiveLimit, get(p).Timeout = &policy.AdaptiveLimit{}, 0 },
			"Methods[0] (/p.S/Get).AdaptiveLimit",
			"; set Timeout, or remove the adaptive limit",
			"; set timeout, or remove the adaptive limit", ""},
		{"min_limit above max_limit", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 5} },
			"AdaptiveLimit.MinLimit",
			"MinLimit 10 is above MaxLimit 5: lower MinLimit or raise MaxLimit",
			"min_limit 10 is above max_limit 5: lower min_limit or raise max_limit", ""},
		{"initial_limit above max_limit", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 50, InitialLimit: 60}
		}, "AdaptiveLimit.InitialLimit",
			"InitialLimit 60 is not between MinLimit 10 and MaxLimit 50: set it within them",
			"initial_limit 60 is not between min_limit 10 and max_limit 50: set it within them", ""},
		{"initial_limit negative", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: -1} },
			"AdaptiveLimit.InitialLimit",
			"; leave it 0 for the default 20 (or the nearer of MinLimit and MaxLimit when 20 is outside them)",
			"; leave it 0 for the default 20 (or the nearer of min_limit and max_limit when 20 is outside them)",
			"for the default 20 (or the nearer of min_limit and max_limit when 20 is outside them)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := withService()
			tc.edit(p)
			var found bool
			for _, pr := range p.Problems() {
				checkReaders(t, pr)
				if pr.Field != tc.field || !strings.HasSuffix(pr.Message, tc.goForm) {
					continue
				}
				found = true
				if !strings.HasSuffix(pr.OptionsMessage, tc.optionsForm) {
					t.Errorf("OptionsMessage %q, want it to end %q", pr.OptionsMessage, tc.optionsForm)
				}
				if pr.Unset != tc.unset {
					t.Errorf("Unset %q, want %q", pr.Unset, tc.unset)
				}
			}
			if !found {
				t.Errorf("no problem at %s ending %q; got %+v", tc.field, tc.goForm, p.Problems())
			}
		})
	}
}
