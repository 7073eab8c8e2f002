// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"strings"
	"unicode"
)

// renamed pairs the options whose policy field is not their name in camel
// case with that field: the one table by which the rules fill a policy
// (GoName) and the policy names its fields in problems and settings
// (OptionName).
var renamed = [...]struct{ option, goName string }{
	{"retry_budget", "Budget"},
	{"circuit_breaker", "Breaker"},
	{"backoff_multiplier", "Multiplier"},
	{"fresh_ttl", "FreshTTL"},
	{"stale_ttl", "StaleTTL"},
	{"ttl", "TTL"},
}

// GoName is the name of the policy field that holds an option:
// cool_down → CoolDown, circuit_breaker → Breaker.
func GoName(option string) string {
	for _, r := range renamed {
		if r.option == option {
			return r.goName
		}
	}
	var b strings.Builder
	for _, part := range strings.Split(option, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// OptionName is the option a policy field holds, GoName's inverse:
// CoolDown → cool_down, Breaker → circuit_breaker.
func OptionName(goName string) string {
	for _, r := range renamed {
		if r.goName == goName {
			return r.option
		}
	}
	var b strings.Builder
	for i, r := range goName {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
