// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/contract"
)

// TestDedupFinalCodes: of every code, only CANCELLED and DEADLINE_EXCEEDED
// are refused as a dedup's final codes, each named; the answers of the
// service pass.
func TestDedupFinalCodes(t *testing.T) {
	if msg := check.DedupFinalCodes(contract.AnswerCodes); msg != "" {
		t.Errorf("the answers of the service refused: %s", msg)
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		msg := check.DedupFinalCodes([]codes.Code{codes.NotFound, c})
		refused := c == codes.Canceled || c == codes.DeadlineExceeded
		if refused != (msg != "") {
			t.Errorf("%v: %q, want refused %v", c, msg, refused)
		}
	}
	msg := check.DedupFinalCodes([]codes.Code{codes.Canceled, codes.NotFound, codes.DeadlineExceeded})
	if !strings.Contains(msg, "[CANCELLED DEADLINE_EXCEEDED]") {
		t.Errorf("both: %q, want both named", msg)
	}
}
