// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/internal/rules"
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
		// annotated says whether some level sets priority or server for
		// the method.
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
		OnStoreError string // the runtime/server constant: "Refuse"
	}
)

// priorityConst names the runtime constant of an annotated priority.
var priorityConst = map[resilientv1.Priority]string{
	resilientv1.Priority_PRIORITY_LOW:      "PriorityLow",
	resilientv1.Priority_PRIORITY_NORMAL:   "PriorityNormal",
	resilientv1.Priority_PRIORITY_HIGH:     "PriorityHigh",
	resilientv1.Priority_PRIORITY_CRITICAL: "PriorityCritical",
}

// resolveServerMethod resolves the priority and the server settings of a
// method, refusing deduplication where no idempotency key can arrive and a
// default timeout shorter than the minimum deadline.
func resolveServerMethod(m *protogen.Method, mp *methodPolicy, eff merged, at site, ps *problems) {
	p := eff.policy
	if eff.has("priority") {
		mp.Priority = priorityConst[p.GetPriority()]
	}
	sm := &serverMethodPolicy{
		Name:           mp.Name,
		Priority:       "PriorityNormal",
		MinDeadline:    durationOf(p.GetServer().GetMinDeadline(), 0),
		DefaultTimeout: durationOf(p.GetServer().GetDefaultTimeout(), 0),
		annotated:      eff.has("priority") || eff.has("server"),
	}
	if mp.Priority != "" {
		sm.Priority = mp.Priority
	}
	mp.Server = sm
	if sm.DefaultTimeout > 0 && sm.MinDeadline > 0 && sm.DefaultTimeout < sm.MinDeadline {
		dl, ml := eff.setBy["server.default_timeout"], eff.setBy["server.min_deadline"]
		if ml > dl {
			ps.add(at, ml, "server.min_deadline", "%v is longer than default_timeout %v%s: a request without deadline would be refused as dead; shorten min_deadline or lengthen default_timeout",
				sm.MinDeadline, sm.DefaultTimeout, origin(eff, "server.default_timeout", ml))
		} else {
			ps.add(at, dl, "server.default_timeout", "%v is shorter than min_deadline %v%s: a request without deadline would be refused as dead; lengthen default_timeout or shorten min_deadline",
				sm.DefaultTimeout, sm.MinDeadline, origin(eff, "server.min_deadline", dl))
		}
	}
	d := p.GetServer().GetDedup()
	if d == nil {
		return
	}
	lvl := eff.setBy["server.dedup"]
	switch kind := streamKind(m); {
	case kind != "":
		ps.add(at, lvl, "server.dedup", "only unary requests are deduplicated, and %s is %s: remove dedup", m.Desc.Name(), kind)
		return
	case mp.IdempotencyKey == "" && !p.GetGenerateIdempotencyKey():
		ps.add(at, lvl, "server.dedup", "%s sends no idempotency key, so the server could not recognise a repeat: name a request field in idempotency_key, set generate_idempotency_key: true, or remove dedup", m.Desc.Name())
		return
	}
	if d.GetTtl() == nil {
		ps.add(at, lvl, "server.dedup.ttl", "is required: set how long a result is kept and replayed, as in dedup: {ttl: {seconds: 86400}}")
	}
	sm.Dedup = &dedupPolicy{
		TTL:          durationOf(d.GetTtl(), 0),
		Lease:        durationOf(d.GetLease(), rules.DefaultLease),
		OnStoreError: "Refuse",
	}
	if d.GetOnStoreError() == resilientv1.OnStoreError_ON_STORE_ERROR_RUN_WITHOUT_DEDUP {
		sm.Dedup.OnStoreError = "RunWithoutDedup"
	}
}

// resolveServer returns the server-side policy of a service, or nil when
// neither the service (shedding) nor any method (priority, server) has a
// server-side annotation: the generated file then does not import
// runtime/server.
func resolveServer(sp *servicePolicy, shared merged, at site, ps *problems) *serverPolicy {
	out := &serverPolicy{}
	annotated := false
	for _, mp := range sp.Methods {
		out.Methods = append(out.Methods, mp.Server)
		annotated = annotated || mp.Server.annotated
	}
	if sh := shared.policy.GetShedding(); sh != nil {
		annotated = true
		rules.SheddingLimits(sh.Low, sh.Normal, sh.High, sh.Critical, func(path, format string, args ...any) {
			lvl, ok := shared.setBy[path]
			if !ok {
				lvl = shared.setBy["shedding"]
			}
			ps.add(at, lvl, path, format, args...)
		})
		out.Shedding = &sheddingPolicy{
			Low: int(sh.GetLow()), Normal: int(sh.GetNormal()), High: int(sh.GetHigh()), Critical: int(sh.GetCritical()),
			Pushback: durationOf(sh.GetPushback(), rules.DefaultShedPushback),
			Code:     rules.DefaultSheddingCode,
		}
		if sh.Code != nil {
			if c, ok := rules.ParseCode(sh.GetCode()); ok {
				out.Shedding.Code = c
			}
		}
	}
	if !annotated {
		return nil
	}
	return out
}
