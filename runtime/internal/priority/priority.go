// Package priority is the wire form of a call's priority, shared by the
// client runtime, which sends it, and runtime/server, which reads it: the
// metadata key, the names of the levels, and the lowest level a context
// already sends. Both packages export the levels as their own Priority
// type (policy.Priority; server.Priority is the same type); this package
// works on their number.
package priority

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// Header is the metadata key that carries a call's priority.
const Header = "resilient-priority"

// The levels, lowest first; 0 means "not said".
const (
	Unspecified uint8 = iota
	Low
	Normal
	High
	Critical
)

var names = [...]string{"unspecified", "low", "normal", "high", "critical"}

// Name returns the name of level p ("low", …, "unspecified" for 0), and
// false for a number that is no level.
func Name(p uint8) (string, bool) {
	if int(p) < len(names) {
		return names[p], true
	}
	return "", false
}

// Parse returns the level named s ("low", "normal", "high", "critical"),
// and false for any other string ("unspecified" included: it is never
// sent).
func Parse(s string) (uint8, bool) {
	for p := Low; p <= Critical; p++ {
		if names[p] == s {
			return p, true
		}
	}
	return Unspecified, false
}

// OrNormal returns p, or Normal for Unspecified and for a number that is
// no level: what a call that says nothing is worth.
func OrNormal(p uint8) uint8 {
	if p == Unspecified || p > Critical {
		return Normal
	}
	return p
}

// Outgoing returns the lowest level that ctx already sends in Header, and
// false when it sends none it knows.
func Outgoing(ctx context.Context) (uint8, bool) {
	lowest, found := Critical, false
	for _, v := range metadata.ValueFromOutgoingContext(ctx, Header) {
		if q, ok := Parse(v); ok && q <= lowest {
			lowest, found = q, true
		}
	}
	return lowest, found
}

// Lowest returns the lowest of ceiling (made normal when unspecified) and
// every known level among values, the values of Header a server received:
// a caller may lower a call's priority, never raise it.
func Lowest(values []string, ceiling uint8) uint8 {
	p := OrNormal(ceiling)
	for _, v := range values {
		if q, ok := Parse(v); ok && q < p {
			p = q
		}
	}
	return p
}
