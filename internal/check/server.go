// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
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
func DedupLease(d time.Duration) Words {
	switch {
	case d < contract.MinLease:
		return words("must be at least %v, got %v: the lease is renewed every quarter of it, and a shorter one lapses under an ordinary store round trip", contract.MinLease, d)
	case d > contract.MaxLease:
		return words("must be at most %v, got %v: a request whose server crashed keeps its key for 3/2 of the lease, refusing every repeat; a store down for longer is {OnStoreError}'s case", contract.MaxLease, d)
	}
	return ""
}

// DedupFinalCodes refuses, among the codes a dedup keeps as a request's
// outcome (cs), CANCELLED and DEADLINE_EXCEEDED: gRPC ends a request with
// them when its caller cancels it or its deadline passes (the client's, or
// the server's default timeout), which says nothing of what the request
// would do. Kept, that ending would be replayed to every repeat of the
// key for the whole TTL, the handler never run again: the caller's own
// retry, with a deadline long enough this time, would get the first
// attempt's timeout, and the order would never be placed.
func DedupFinalCodes(cs []codes.Code) string {
	var bad []string
	for _, c := range cs {
		if c == codes.Canceled || c == codes.DeadlineExceeded {
			bad = append(bad, codename.Of(c))
		}
	}
	switch len(bad) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("holds %s, which ends a request whose caller cancelled it or whose deadline passed, "+
			"not an answer to it: kept, it would be replayed to every retry of the key for the whole TTL, "+
			"and the handler never run again", bad[0])
	}
	return fmt.Sprintf("holds [%s], which end a request whose caller cancelled it or whose deadline passed, "+
		"not answers to it: kept, they would be replayed to every retry of the key for the whole TTL, "+
		"and the handler never run again", strings.Join(bad, " "))
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
