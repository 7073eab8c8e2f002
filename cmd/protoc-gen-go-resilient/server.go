// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// resolveServer returns the server-side policy of a service, what the
// generated XxxServerPolicy literal holds, or nil when neither the service
// (shedding) nor any method (server) has a server-side annotation: the
// generated file then writes none, and a program using only the client does
// not link runtime/server. A priority is not enough: the client sends it,
// and without shedding the server has nothing to do with it. The rules
// check the shedding limits (rules.CheckShedding) and the methods' settings
// (rules.CheckServer).
func resolveServer(sp *service) *policy.Server {
	out := &policy.Server{Name: sp.Policy.Name}
	annotated := false
	for _, m := range sp.methods {
		out.Methods = append(out.Methods, resolveServerMethod(m))
		annotated = annotated || m.eff.Has("server")
	}
	if sh := sp.shared.Policy.GetShedding(); sh != nil {
		annotated = true
		out.Shedding = &policy.Shedding{}
		// The four limits go to Limits, pushback and code to the Shedding.
		fill(&struct {
			*policy.Limits
			*policy.Shedding
		}{&out.Shedding.Limits, out.Shedding}, "shedding", sh)
	}
	if !annotated {
		return nil
	}
	return out
}

// resolveServerMethod resolves the server settings of a method, once its
// priority is known: the annotated one, else normal.
func resolveServerMethod(m *method) policy.ServerMethod {
	p := m.eff.Policy
	sm := policy.ServerMethod{Name: m.Policy.Name, Kind: m.Policy.Kind, Priority: m.Policy.Priority}
	if sm.Priority == policy.PriorityUnspecified {
		sm.Priority = policy.PriorityNormal
	}
	fill(&sm, "server", p.GetServer()) // min_deadline, default_timeout
	if d := p.GetServer().GetDedup(); d != nil {
		sm.Dedup = &policy.Dedup{}
		// on_store_error is an enum of the options, filled apart and
		// turned into the policy's mode.
		v := struct {
			*policy.Dedup
			OnStoreError resilientv1.OnStoreError
		}{Dedup: sm.Dedup}
		fill(&v, "server.dedup", d)
		if v.OnStoreError == resilientv1.OnStoreError_ON_STORE_ERROR_RUN_WITHOUT_DEDUP {
			sm.Dedup.OnStoreError = policy.StoreErrorRunWithoutDedup
		}
	}
	return sm
}
