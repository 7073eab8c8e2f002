// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// TestAttackR18ChecksSheddingCodeAdvice: shedding.code holds UNAVAILABLE
// or RESOURCE_EXHAUSTED only. The rebuilt walk refused a name gRPC does
// not define with the advice of the code lists ("write a canonical
// upper-case gRPC code name, such as "UNAVAILABLE" or
// "DEADLINE_EXCEEDED""), or "did you mean "DEADLINE_EXCEEDED"?" for
// deadline_exceeded: codes the same field refuses next. Before the
// rebuild it said what the field holds; an unknown name must again, and
// a misspelling be told its spelling only when the field holds it.
func TestAttackR18ChecksSheddingCodeAdvice(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"BOGUS", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "BOGUS"; remove it for the default "UNAVAILABLE"`},
		{"", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got ""; remove it for the default "UNAVAILABLE"`},
		{"deadline_exceeded", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "deadline_exceeded"; remove it for the default "UNAVAILABLE"`},
		{"Not-Found", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "Not-Found"; remove it for the default "UNAVAILABLE"`},
		{"unavailable", `unknown status code "unavailable": did you mean "UNAVAILABLE"? Codes are written by their canonical upper-case name; remove it for the default "UNAVAILABLE"`},
		{"resource-exhausted", `unknown status code "resource-exhausted": did you mean "RESOURCE_EXHAUSTED"? Codes are written by their canonical upper-case name; remove it for the default "UNAVAILABLE"`},
		{"OK", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "OK"; remove it for the default "UNAVAILABLE"`},
		{"NOT_FOUND", `must be "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got "NOT_FOUND"; remove it for the default "UNAVAILABLE"`},
	} {
		p := &resilientv1.Policy{Shedding: &resilientv1.Shedding{Low: proto.Uint32(1), Normal: proto.Uint32(2), High: proto.Uint32(3), Critical: proto.Uint32(4), Code: proto.String(tc.name)}}
		var got []string
		Check(p, false, func(path, format string, args ...any) {
			got = append(got, path+": "+fmt.Sprintf(format, args...))
		})
		if len(got) != 1 || got[0] != "shedding.code: "+tc.want {
			t.Errorf("shedding.code %q: got %q, want %q", tc.name, got, "shedding.code: "+tc.want)
		}
		// No code the field refuses is ever advised.
		for _, g := range got {
			for _, refused := range []string{"DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL"} {
				if strings.Contains(g, `"`+refused+`"`) && tc.name != refused && check.SheddingCode(refused) != "" {
					t.Errorf("shedding.code %q: advises %s, which the field refuses: %s", tc.name, refused, g)
				}
			}
		}
	}
}
