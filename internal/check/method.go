// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"time"
)

// The checks of what a method's kind and idempotency allow. method is the
// method's name without its service ("GetStock"); kind is Kind's
// description of it, "" for a unary method. Each returns the core; the
// caller adds how to mend it.

// Kind describes a streaming method for the messages below ("a
// server-streaming method"); "" for a unary one.
func Kind(clientStreaming, serverStreaming bool) string {
	switch {
	case clientStreaming && serverStreaming:
		return "a bidi-streaming method"
	case clientStreaming:
		return "a client-streaming method"
	case serverStreaming:
		return "a server-streaming method"
	}
	return ""
}

// StreamRetry refuses a retry of a streaming method.
func StreamRetry(method, kind string) string {
	return stream("streams are not retried", method, kind)
}

// StreamHedging refuses hedging of a streaming method.
func StreamHedging(method, kind string) string {
	return stream("streams are not hedged", method, kind)
}

// StreamCache refuses a cache of a streaming method.
func StreamCache(method, kind string) string {
	return stream("streams are not cached", method, kind)
}

// StreamKey refuses an idempotency key, named or generated, on a
// streaming method.
func StreamKey(method, kind string) string {
	return stream("only unary calls send an idempotency key", method, kind)
}

func stream(refusal, method, kind string) string {
	if kind == "" {
		return ""
	}
	return fmt.Sprintf("%s, and %s is %s", refusal, method, kind)
}

// RetrySafe refuses the retries of a method that is neither idempotent
// nor keyed (an idempotency key, named or generated). The caller asks
// only about a method that retries.
func RetrySafe(method string, idempotent, keyed bool) Words {
	if idempotent || keyed {
		return ""
	}
	return words("%s is not idempotent and has no {IdempotencyKey}, so a retry could apply it twice", method)
}

// HedgingIdempotent refuses hedging of a method that is not idempotent.
func HedgingIdempotent(method string, idempotent bool) string {
	if idempotent {
		return ""
	}
	return fmt.Sprintf("%s is not idempotent, and hedged copies run at the same time, so each could apply it", method)
}

// HedgingRetries refuses hedging of a method that also retries (from: the
// origin of its retry).
func HedgingRetries(method string, retries bool, from string) string {
	if !retries {
		return ""
	}
	return fmt.Sprintf("%s also retries%s: a method hedges or retries, not both, since hedged copies already repeat the call", method, from)
}

// CacheIdempotent refuses a cache of a method that is not idempotent.
func CacheIdempotent(method string, idempotent bool) string {
	if idempotent {
		return ""
	}
	return fmt.Sprintf("%s is not idempotent: only reads are cached, since a cached answer means the call is not made", method)
}

// CacheTimeout refuses a cache of a method with neither timeout nor
// overall_timeout (0 for none), mend included: the call shared by the
// callers of a key runs detached from them.
func CacheTimeout(method string, timeout, overall time.Duration) Words {
	if timeout != 0 || overall != 0 {
		return ""
	}
	return words("%s has neither {Timeout} nor {OverallTimeout}: the call shared by the callers of a key runs detached from them, with the method's own limit; set {Timeout} or {OverallTimeout}", method)
}

// KeyTwice refuses a generated idempotency key beside a named one (key,
// "" for none).
func KeyTwice(key string, generate bool) string {
	if !generate || key == "" {
		return ""
	}
	return fmt.Sprintf("the method already sends its field %q as the idempotency key", key)
}
