// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The server side of the resolved policy: what the generated
// XxxServerPolicy literal (a runtime/server ServicePolicy) holds.
type (
	serverPolicy struct {
		Shedding *sheddingPolicy
		Methods  []*serverMethodPolicy
	}
	serverMethodPolicy struct {
		Name           string
		Priority       string // the runtime/server constant: "PriorityNormal"
		MinDeadline    time.Duration
		DefaultTimeout time.Duration
		Dedup          *dedupPolicy
		// annotated says whether some level sets server for the method. A
		// priority alone is the client's to send: it makes no server
		// policy, since a service is shed only under its own shedding.
		annotated bool
	}
	sheddingPolicy struct {
		Low, Normal, High, Critical int
		Pushback                    time.Duration
		Code                        codes.Code
	}
	dedupPolicy struct {
		TTL          time.Duration
		Lease        time.Duration
		OnStoreError resilientv1.OnStoreError
	}
)

// OnStoreErrorConst names the runtime/server constant of the choice:
// "Refuse" (also for the unspecified value) or "RunWithoutDedup".
func (d *dedupPolicy) OnStoreErrorConst() string {
	if d.OnStoreError == resilientv1.OnStoreError_ON_STORE_ERROR_RUN_WITHOUT_DEDUP {
		return "RunWithoutDedup"
	}
	return "Refuse"
}

// resolveServerMethod resolves the server settings of a method. The rules
// check them (rules.CheckServer).
func resolveServerMethod(m *method) *serverMethodPolicy {
	p := m.eff.policy
	sm := &serverMethodPolicy{
		Name:      m.Policy.Name,
		Priority:  "PriorityNormal",
		annotated: m.eff.has("server"),
	}
	fill(sm, "server", p.GetServer()) // min_deadline, default_timeout
	if m.Policy.Priority != policy.PriorityUnspecified {
		sm.Priority = priorityConst[m.Policy.Priority]
	}
	if d := p.GetServer().GetDedup(); d != nil {
		sm.Dedup = &dedupPolicy{}
		fill(sm.Dedup, "server.dedup", d)
	}
	return sm
}

// resolveServer returns the server-side policy of a service, or nil when
// neither the service (shedding) nor any method (server) has a server-side
// annotation: the generated file then does not import runtime/server, and
// a program using only the client does not link it. A priority is not
// enough: the client sends it, and without shedding the server has
// nothing to do with it. The rules check the shedding limits
// (rules.CheckShedding).
func resolveServer(s *protogen.Service, sp *service) *serverPolicy {
	out := &serverPolicy{}
	annotated := false
	for _, m := range sp.methods {
		sm := resolveServerMethod(m)
		out.Methods = append(out.Methods, sm)
		annotated = annotated || sm.annotated
	}
	if sh := sp.shared.policy.GetShedding(); sh != nil {
		annotated = true
		out.Shedding = &sheddingPolicy{}
		fill(out.Shedding, "shedding", sh)
	}
	if !annotated {
		return nil
	}
	return out
}
