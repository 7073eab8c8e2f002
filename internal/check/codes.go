// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/contract"
)

// List is a list of status codes in a policy, by what its codes mean.
type List int

// The lists of status codes of a policy.
const (
	// Retryable: retry.retryable_codes, the codes an attempt is repeated on.
	Retryable List = iota
	// Failure: circuit_breaker.failure_codes, the codes that count against
	// the dependency.
	Failure
	// NonFatal: hedging.non_fatal_codes, the codes with which a copy may
	// fail and leave the others running.
	NonFatal
)

// why is, for each list, why it cannot hold OK, and why it cannot hold an
// answer of the service (contract.AnswerCodes), for one code and for
// several.
var why = [...]struct{ ok, answer, answers string }{
	Retryable: {
		`"OK" is a success, there is nothing to retry: remove it`,
		"not a transient failure: repeating the call cannot change it; remove it",
		"not transient failures: repeating the call cannot change them; remove them",
	},
	Failure: {
		`"OK" is a success and cannot count as a failure: remove it`,
		"not a failure of it: an answer shows the dependency is up, so it never opens the breaker; remove it",
		"not failures of it: an answer shows the dependency is up, so it never opens the breaker; remove them",
	},
	NonFatal: {
		`"OK" is a success, there is nothing to hedge: remove it`,
		"not a transient failure: repeating the call cannot change it; remove it",
		"not transient failures: repeating the call cannot change them; remove them",
	},
}

// IsAnswer reports whether c is an answer of the service
// (contract.AnswerCodes): never retryable, never a failure.
func IsAnswer(c codes.Code) bool {
	for _, a := range contract.AnswerCodes {
		if c == a {
			return true
		}
	}
	return false
}

// Code refuses one code of a list written element by element (an options
// list, whose problems are reported at each index): OK, or an answer of
// the service.
func Code(l List, c codes.Code) string {
	switch {
	case c == codes.OK:
		return why[l].ok
	case IsAnswer(c):
		return fmt.Sprintf("%q is an answer of the service, %s", codename.Of(c), why[l].answer)
	}
	return ""
}

// Codes refuses the codes of a list held as a set, without order or
// index (a Go CodeSet): one message if it holds OK, one naming every
// answer of the service it holds; none for a list that is fine. The
// reasons are Code's.
func Codes(l List, cs []codes.Code) []string {
	var out []string
	var answers []string
	for _, c := range cs {
		switch {
		case c == codes.OK:
			out = append(out, why[l].ok)
		case IsAnswer(c):
			answers = append(answers, codename.Of(c))
		}
	}
	if len(answers) > 0 {
		out = append(out, fmt.Sprintf("holds [%s], answers of the service and %s", strings.Join(answers, " "), why[l].answers))
	}
	return out
}
