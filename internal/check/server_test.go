// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The server side's mistakes are refused by the plugin's checks
// (rules.CheckFile on a .proto) and by policy.Server.Validate (a policy
// built in Go) with the same core.
func TestServerBoundariesShareTheCore(t *testing.T) {
	shedding := func(low, normal uint32, code string) *resilientv1.Policy {
		sh := &resilientv1.Shedding{Low: u32(low), Normal: u32(normal), High: u32(90), Critical: u32(120)}
		if code != "" {
			sh.Code = proto.String(code)
		}
		return &resilientv1.Policy{Shedding: sh}
	}
	dedup := func(ttl, lease time.Duration) *resilientv1.Policy {
		return &resilientv1.Policy{IdempotencyKey: proto.String("id"), Server: &resilientv1.Server{Dedup: &resilientv1.Dedup{Ttl: sec(ttl), Lease: sec(lease)}}}
	}
	server := func(edit func(*policy.Server)) error {
		p := policy.Server{Name: "t.Svc", Shedding: &policy.Shedding{Limits: policy.Limits{Low: 30, Normal: 60, High: 90, Critical: 120}},
			Methods: []policy.ServerMethod{{Name: "/t.Svc/Get", Kind: policy.KindUnary,
				Dedup: &policy.Dedup{TTL: time.Hour}, NewResponse: nil}}}
		edit(&p)
		return p.Validate()
	}
	for _, tc := range []struct {
		name string
		core check.Words // the core, which both read in their names
		opts options
		edit func(*policy.Server)
	}{
		{"shedding out of order", check.Words(check.SheddingBelow(20, 30, "low")[len("20 is below low (30)"):]),
			options{svc: shedding(30, 20, "")}, func(p *policy.Server) { p.Shedding.Limits.Normal = 20 }},
		{"shedding code", check.Words(check.SheddingCode("INTERNAL")),
			options{svc: shedding(30, 60, "INTERNAL")}, func(p *policy.Server) { p.Shedding.Code = codes.Internal }},
		{"dedup ttl", check.Words(check.DedupTTL(10 * time.Millisecond)),
			options{get: dedup(10*time.Millisecond, time.Second)}, func(p *policy.Server) { p.Methods[0].Dedup.TTL = 10 * time.Millisecond }},
		{"dedup lease", check.DedupLease(2 * time.Millisecond),
			options{get: dedup(time.Hour, 2*time.Millisecond)}, func(p *policy.Server) { p.Methods[0].Dedup.Lease = 2 * time.Millisecond }},
		{"dedup lease of centuries", check.DedupLease(2562047 * time.Hour),
			options{get: dedup(time.Hour, 2562047*time.Hour)}, func(p *policy.Server) { p.Methods[0].Dedup.Lease = 2562047 * time.Hour }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.core == "" {
				t.Fatal("check finds nothing wrong with the mistake")
			}
			found := optionFindings(t, tc.opts)
			if !strings.Contains(strings.Join(found, "\n"), tc.core.Options()) {
				t.Errorf("rules.CheckFile said %q, want the core %q", found, tc.core.Options())
			}
			if err := server(tc.edit); err == nil || !strings.Contains(err.Error(), tc.core.Go()) {
				t.Errorf("policy.Server.Validate said %v, want the core %q", err, tc.core.Go())
			}
		})
	}
}
