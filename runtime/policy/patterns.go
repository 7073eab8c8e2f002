// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"time"

	"github.com/go-resilient/resilient/internal/check"
)

// Hedging says when further copies of a slow call are sent. A method
// hedges or retries, never both: hedging already repeats the call, and
// retrying each copy would multiply the load the retry budget is there to
// bound (gRPC's service config makes the same choice).
type Hedging struct {
	// Delay is how long to wait for an answer before sending the next
	// copy; a good value is the method's observed p95. Must be positive.
	Delay time.Duration
	// MaxCopies is the number of copies in all, the first included; at
	// least 2.
	MaxCopies int
	// NonFatalCodes are the codes with which a copy may fail and leave the
	// others running (the next copy is then sent at once). Any other
	// answer, success or not, ends the call.
	NonFatalCodes CodeSet
}

func (h *Hedging) check(f string, r *reporter) {
	r.fail(f+".Delay", withHint(check.Positive(h.Delay), "; a good value is the method's observed p95"), "")
	r.fail(f+".MaxCopies", check.MaxCopies(int64(h.MaxCopies)), "")
	codeList(r, f+".NonFatalCodes", check.NonFatal, h.NonFatalCodes)
}

// RateLimit configures a token bucket on the calls a client sends to
// a dependency.
type RateLimit struct {
	// RequestsPerSecond is the sustained rate of calls; must be positive
	// and finite.
	RequestsPerSecond float64
	// Burst is the number of calls that may go at once after a quiet spell;
	// at least 1.
	Burst int
	// MaxWait is how long a call may wait for a token, never past its
	// deadline; 0 refuses at once.
	MaxWait time.Duration
}

func (p *RateLimit) check(f string, r *reporter) {
	r.fail(f+".RequestsPerSecond", check.Rate(p.RequestsPerSecond), "")
	r.fail(f+".Burst", check.AtLeastOne(int64(p.Burst)), "")
	r.fail(f+".MaxWait", withHint(check.NotNegative(p.MaxWait), "; use 0 to refuse a call at once when no token is left"), "")
}

// Cache configures a stale-on-error cache with single flight for an
// idempotent read. Before any other layer, a fresh answer for the
// request's key is returned without calling. Otherwise the callers of one
// key share one call, which runs detached from any one caller's
// cancellation, with its own limit (the longest the method's policy lets
// a call run: its OverallTimeout, else its attempts' Timeout and the
// backoffs between them, or its hedged copies' bound, as the exports
// bound it), through the rate limit, bulkhead, retries and breaker; a
// caller who gives up stops waiting; when the last one has given up, the
// call starts nothing more, and only an attempt already sent runs on, its
// answer kept. A caller whose context is already done gets its error and
// starts nothing. When the shared call fails on the dependency's side or
// is refused by the runtime, or the caller's own deadline runs out while it
// waits for that call, and an answer younger than StaleTTL is kept, that
// answer is returned instead (counted as a fallback with cause
// "stale_cache"); only a key with no such answer fails. Answers are copied
// for each caller.
type Cache struct {
	// FreshTTL is how long an answer is served without calling; positive.
	FreshTTL time.Duration
	// StaleTTL is how long after it was fetched an answer may still be
	// served when the dependency fails transiently or is refused by the
	// runtime (breaker open, bulkhead full, rate limited); at least
	// FreshTTL. Equal to FreshTTL: no stale answers.
	StaleTTL time.Duration
	// MaxEntries bounds the entries kept; the least recently used go
	// first. At least 1.
	MaxEntries int
	// KeyFields names the request fields whose values generated code
	// makes the key of. NewClient refuses an edit that changes them (the
	// generated key function reads the annotated fields), and Describe
	// shows them.
	KeyFields []string
}

// check checks the cache's values. Its stale_ttl is checked against its
// fresh_ttl on the level that sets them: the options set a cache on a
// method only, whole.
func (p *Cache) check(f string, r *reporter) {
	r.fail(f+".FreshTTL", withHint(check.Positive(p.FreshTTL), "; it is how long an answer is served without calling"), "")
	if r.written && p.StaleTTL <= 0 {
		positive(p.StaleTTL, f+".StaleTTL", r)
	} else {
		r.report(f+".StaleTTL", "{StaleTTL}", check.StaleTTL(p.FreshTTL, p.StaleTTL), "; raise {StaleTTL}, or set it to {FreshTTL} for no stale answers", "", false, f+".FreshTTL")
	}
	r.fail(f+".MaxEntries", check.AtLeastOne(int64(p.MaxEntries)), "")
}
