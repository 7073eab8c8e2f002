// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// level is where in a .proto file a policy is written: the file, a service
// or a method. Levels are ordered from the most general to the most
// specific, as rules.Level, which they convert to and from.
type level int

const (
	levelFile    = level(rules.LevelFile)
	levelService = level(rules.LevelService)
	levelMethod  = level(rules.LevelMethod)
)

// option names the extension of a level as the user writes it.
func (l level) option() string { return rules.Level(l).Option() }

// layer is the policy written at one level; policy is nil when the level
// sets none.
type layer struct {
	level  level
	policy *resilientv1.Policy
}

// merged is a policy resolved from several layers: rules is the merge
// itself (rules.Merge), as the checks shared with the buf lint plugin and
// the override loader take it, and policy its result.
type merged struct {
	policy *resilientv1.Policy
	rules  rules.Merged
}

// setBy returns the most specific level that set the field at path
// ("retry", "retry.max_attempts", "timeout"), so that a problem can name
// the option where the value was written; ok is false when no layer set it.
func (m merged) setBy(path string) (lvl level, ok bool) {
	l, ok := m.rules.SetBy[path]
	return level(l), ok
}

// has reports whether some layer set the field at path.
func (m merged) has(path string) bool { return m.rules.Has(path) }

// mergeLayers merges the layers in order, each overriding the ones before
// it field by field (rules.Merge).
func mergeLayers(layers ...layer) merged {
	ls := make([]rules.Layer, len(layers))
	for i, l := range layers {
		ls[i] = rules.Layer{Level: rules.Level(l.level), Policy: l.policy}
	}
	r := rules.Merge(ls...)
	return merged{policy: r.Policy, rules: r}
}
