// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestLintAgrees checks, on every input under testdata/refuse, that the
// lint rules (rules.CheckFile, which the buf check plugin runs) find
// exactly the plugin's refusals, in the same order, and that every rule
// the plugin enforces refuses at least one of them.
func TestLintAgrees(t *testing.T) {
	paths, err := filepath.Glob("testdata/refuse/*.proto")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no refusal inputs: %v", err)
	}
	fired := map[string]bool{}
	for _, p := range paths {
		name := "refuse/" + filepath.Base(p)
		t.Run(strings.TrimSuffix(filepath.Base(p), ".proto"), func(t *testing.T) {
			req := testRequest(t, name)
			var want []string
			for _, line := range strings.Split(runPlugin(t, req).GetError(), "\n") {
				_, rest, _ := strings.Cut(line, ": ") // the position
				want = append(want, rest)
			}
			var got []string
			lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
				if fi.Rule == "" {
					t.Errorf("finding without a rule: %+v", fi)
				}
				if fi.Rule == rules.RuleNoTimeout {
					return // lint only
				}
				fired[fi.Rule] = true
				got = append(got, fmt.Sprintf("%s: %s.%s: %s", d.FullName(), fi.Level.Option(), fi.Path, fi.Message))
			})
			if !slices.Equal(got, want) {
				t.Errorf("lint finds:\n%s\nthe plugin refuses:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	for _, id := range []string{
		rules.RuleInvalidValue, rules.RuleMissingValue, rules.RuleRetryNotIdempotent,
		rules.RuleTimeoutExceedsOverall, rules.RuleKeyField, rules.RuleIdempotencyContradiction,
		rules.RuleStreamRetry, rules.RuleBackoffOrder, rules.RuleScope,
		rules.RuleHedging, rules.RuleCache, rules.RuleServer,
	} {
		if !fired[id] {
			t.Errorf("no input under testdata/refuse is refused by %s", id)
		}
	}
}

// lintFindings runs the lint rules (rules.CheckFile) on the files req asks
// to generate, as the buf check plugin does, calling found for each
// finding.
func lintFindings(t *testing.T, req *pluginpb.CodeGeneratorRequest, found func(protoreflect.Descriptor, rules.Finding)) {
	t.Helper()
	var flags flag.FlagSet
	gen, err := protogen.Options{ParamFunc: flags.Set}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			rules.CheckFile(f.Desc, found)
		}
	}
}
