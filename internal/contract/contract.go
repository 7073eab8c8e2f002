// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package contract holds the values that the plugin's checks
// (internal/rules), the client runtime (runtime) and the server runtime
// (runtime/server) must agree on, each written once: the defaults that the
// runtime applies to a policy value that leaves them out, the limits its
// state machines can count to, and the status codes that are a service's
// answers. It is a leaf, like internal/codename: the plugin's binary links
// it without the runtime, and the runtime without the options contract.
package contract

import (
	"time"

	"google.golang.org/grpc/codes"
)

// The retry budget of a service that retries without setting one: over
// BudgetWindow, 10 % of the requests plus 10 retries.
const (
	BudgetRatio      = 0.1
	BudgetMinRetries = 10
	BudgetWindow     = 10 * time.Second
)

// MaxHalfOpenProbes is the most half-open probes the circuit breaker
// counts: its probe counters are 16 bits wide.
const MaxHalfOpenProbes = 1<<16 - 1

// Lease is the lease of a deduplicated method that sets none: how long a
// server's claim on a key lasts without being renewed. MinLease and MinTTL
// are the least lease and result TTL a deduplicated method may set: the
// lease is renewed every quarter of it, and a shorter one would lapse under
// an ordinary store round trip; a result kept for less than MinTTL would be
// gone before a client's retries of the request end. MaxLease is the
// longest lease: the lease is the store outage a running request outlives,
// and after a crash the key refuses its repeats for 3/2 of it, so a longer
// one holds a crashed request's key, and every retry of it, for hours.
const (
	Lease    = 10 * time.Second
	MinLease = 100 * time.Millisecond
	MaxLease = time.Hour
	MinTTL   = time.Second
)

// ShedPushback is the pushback of a shedding refusal that sets none: how
// long the server asks its callers to wait before they retry.
const ShedPushback = time.Second

// IdempotencyKeyHeader is the metadata key that carries a call's
// idempotency key, identical on every attempt: the generated clients send
// it, the server deduplicates by it, and the plugin's exports match it.
const IdempotencyKeyHeader = "idempotency-key"

// MaxIdempotencyKeyLength is the longest idempotency key, in bytes as
// sent, that a server's Guard keeps: it refuses a longer one with
// INVALID_ARGUMENT, so that a caller cannot make each entry of the store as
// large as a header may be (megabytes), and the client refuses to send one.
// It is Stripe's limit; the generated keys are 26 bytes.
const MaxIdempotencyKeyLength = 255

// AnswerCodes are the codes by which a service answers a request it
// understood: repeating the request cannot change them, so they are never
// retryable, and a server stores them as a request's outcome. Callers must
// not change the slice.
var AnswerCodes = []codes.Code{
	codes.InvalidArgument,
	codes.NotFound,
	codes.AlreadyExists,
	codes.PermissionDenied,
	codes.FailedPrecondition,
	codes.OutOfRange,
	codes.Unimplemented,
	codes.Unauthenticated,
}

// OverloadCodes are the codes that tell the adaptive layers (the adaptive
// limit, the client-side throttler) the dependency did not serve an
// attempt: it timed out, refused it as overloaded, or was unreachable (for
// the limit, an UNAVAILABLE is a drop only when a Guard marked it shed:
// runtime/adaptive.go, judgeAdaptive).
// Every other code is an answer to them. Callers must not change the
// slice.
var OverloadCodes = []codes.Code{codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable}

// The adaptive concurrency limit's defaults (runtime/internal/adaptive)
// and its largest max_limit.
const (
	AdaptiveMinLimit       = 1
	AdaptiveMaxLimit       = 100
	AdaptiveInitialLimit   = 20
	AdaptiveTolerance      = 1.5
	AdaptiveSmoothing      = 0.5
	AdaptiveBaselineWindow = 30 * time.Second
	MaxAdaptiveLimit       = 1 << 20
)

// The client-side throttler's defaults (runtime/internal/throttle).
const (
	ThrottleK          = 2.0
	ThrottleWindow     = 5 * time.Second
	ThrottleMaxRefusal = 0.9
)

// MinAdaptiveWindow is the shortest window of the adaptive layers (the
// limit's baseline_window, the throttler's window): each holds ten
// buckets (runtime/internal/adaptive's baseline, runtime/internal/window's
// Time), of at least a nanosecond each.
const MinAdaptiveWindow = 10 * time.Nanosecond

// MaxWindowCalls is the largest count-based breaker window
// (runtime/internal/window.MaxCount).
const MaxWindowCalls = 1 << 21
