// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"google.golang.org/grpc/codes"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
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

// priorityConst names the runtime constant of an annotated priority.
var priorityConst = map[resilientv1.Priority]string{
	resilientv1.Priority_PRIORITY_LOW:      "PriorityLow",
	resilientv1.Priority_PRIORITY_NORMAL:   "PriorityNormal",
	resilientv1.Priority_PRIORITY_HIGH:     "PriorityHigh",
	resilientv1.Priority_PRIORITY_CRITICAL: "PriorityCritical",
}

// resolveServerMethod resolves the priority and the server settings of a
// method. The rules check them (rules.CheckServer).
func resolveServerMethod(mp *methodPolicy, eff merged) {
	p := eff.policy
	if eff.has("priority") {
		mp.Priority = priorityConst[p.GetPriority()]
	}
	sm := &serverMethodPolicy{
		Name:      mp.Name,
		Priority:  "PriorityNormal",
		annotated: eff.has("server"),
	}
	fill(sm, "server", p.GetServer()) // min_deadline, default_timeout
	if mp.Priority != "" {
		sm.Priority = mp.Priority
	}
	mp.Server = sm
	if d := p.GetServer().GetDedup(); d != nil {
		sm.Dedup = &dedupPolicy{}
		fill(sm.Dedup, "server.dedup", d)
	}
}

// resolveServer returns the server-side policy of a service, or nil when
// neither the service (shedding) nor any method (server) has a server-side
// annotation: the generated file then does not import runtime/server, and
// a program using only the client does not link it. A priority is not
// enough: the client sends it, and without shedding the server has
// nothing to do with it. The rules check the shedding limits
// (rules.CheckShedding).
func resolveServer(sp *servicePolicy, shared merged) *serverPolicy {
	out := &serverPolicy{}
	annotated := false
	for _, mp := range sp.Methods {
		out.Methods = append(out.Methods, mp.Server)
		annotated = annotated || mp.Server.annotated
	}
	if sh := shared.policy.GetShedding(); sh != nil {
		annotated = true
		out.Shedding = &sheddingPolicy{}
		fill(out.Shedding, "shedding", sh)
	}
	if !annotated {
		return nil
	}
	return out
}
