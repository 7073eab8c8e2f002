// Package runtime applies the resilience policies annotated in .proto
// files to gRPC calls: the code that protoc-gen-go-resilient generates
// calls it, and operators configure it. All behaviour lives here; the
// generated code holds the policy as a Go literal and binds each method to
// it by name.
//
// # What it exports
//
// For generated code: NewClient (which takes a policy.Service: the policy
// values and their checks are the package runtime/policy, which the plugin
// fills and prints), the typed handles (NewUnary,
// NewServerStream, NewStream and their Call methods), Client.Conn for
// streams, and the helpers that make keys of request fields (JoinKey,
// KeyFromInt, KeyFromUint, KeyFromBytes). For operators: the options
// (WithRegisterer, WithLogger, WithObserver, WithClock, WithPolicy), the
// inspection methods of Client (BreakerState, BulkheadInUse, Policy,
// Describe, Changes), the errors the runtime returns (Error and its
// sentinels), priorities (WithPriority), pushback (Pushback) and the
// recommended connection options (DialOptions, ServerOptions). The
// primitives (breaker, budget, bulkhead, rate limiter, cache, sliding
// window) are unexported or under internal/: they are reached through a
// policy, never built by hand.
//
// # Reading order
//
// Start with handle.go (what a generated method calls) and client.go (what
// NewClient builds from a policy), then follow one unary call through the
// layers, outside in:
//
//	fallback       unary.go       answers a failure of the dependency or a refusal
//	cache          cache.go       a fresh answer, or one shared call per key
//	rate limit     ratelimit.go   a token bucket, waiters served in order
//	bulkhead       bulkhead.go    bounds the calls in flight
//	overall limit  unary.go       the whole call, retries included
//	retry loop     retry.go       attempts within the retry budget (budget.go),
//	  or hedging   hedge.go       backoff with full jitter (backoff.go) or the
//	                              server's pushback (pushback.go)
//	breaker        admission.go   admits each attempt and settles its outcome
//	               breaker.go     the state machine, over internal/window
//	timeout        unary.go       the per-attempt timeout (attemptOnce)
//	the call
//
// Streams take the bulkhead, the breaker and the timeout when they open
// (stream.go, through Client.Conn), and are never retried.
//
// Around the layers: bind.go binds methods by name, describe.go and
// provenance.go what is in force and where each value came from, errors.go
// the errors, metrics.go and observer.go what is counted and reported,
// priority.go the priority sent to servers, key.go the keys, dial.go the
// connection options, clock.go the clock the state machines read,
// hot.go what a method's hot path asks of its policy, derived once, and
// saturate.go the arithmetic that never wraps. The server side is the
// package runtime/server.
package runtime
