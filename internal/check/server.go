// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
)

// DedupTTL refuses a dedup ttl too short to outlast the client's retries.
func DedupTTL(d time.Duration) string {
	if d < contract.MinTTL {
		return fmt.Sprintf("must be at least %v, got %v: a result kept for less is gone before the client's retries of the request end", contract.MinTTL, d)
	}
	return ""
}

// DedupLease refuses a dedup lease shorter than a store round trip allows
// or longer than contract.MaxLease (1 h). The lease is the longest store
// outage a running request outlives, not how long its handler may run
// (the key is renewed while it runs); but a request whose server crashed
// keeps its key for 3/2 of the lease, during which its repeats wait or
// are refused and never run it. An hour already outlasts any retry a
// client makes: a store that stays down longer is OnStoreError's case,
// and a lease of days (or centuries, the longest Duration) would hold a
// crashed request's key long after the dedup TTL of its outcome, and
// every caller of that key with it.
func DedupLease(d time.Duration) string {
	switch {
	case d < contract.MinLease:
		return fmt.Sprintf("must be at least %v, got %v: the lease is renewed every quarter of it, and a shorter one lapses under an ordinary store round trip", contract.MinLease, d)
	case d > contract.MaxLease:
		return fmt.Sprintf("must be at most %v, got %v: a request whose server crashed keeps its key for 3/2 of the lease, refusing every repeat; a store down for longer is on_store_error's case", contract.MaxLease, d)
	}
	return ""
}

// SheddingBelow refuses a shedding limit below the limit of a less
// important priority, prevName's prev.
func SheddingBelow(v, prev int64, prevName string) string {
	if v < prev {
		return fmt.Sprintf("%d is below %s (%d): the limits are cumulative, and a more important request may never be refused before a less important one", v, prevName, prev)
	}
	return ""
}

// SheddingCode refuses a shedding refusal's code other than the two a
// client reads as overload.
func SheddingCode(name string) string {
	if name != "UNAVAILABLE" && name != "RESOURCE_EXHAUSTED" {
		return fmt.Sprintf(`must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got %q`, name)
	}
	return ""
}
