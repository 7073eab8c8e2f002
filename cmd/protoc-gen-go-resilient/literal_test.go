// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"
)

// literalStart begins the doc comment of a generated policy literal.
var literalStart = regexp.MustCompile(`^// \w+(ResilientPolicy|ServerPolicy) is `)

// TestPolicyLiteralsReadable holds the generated policy literals (client
// and server) of every golden file and of the example to what a reviewer
// reads: no line longer than 100 columns (a tab counted as 4), durations
// written with their unit (no bare count of nanoseconds).
func TestPolicyLiteralsReadable(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*_resilient.pb.go.golden")
	example, _ := filepath.Glob("../../example/gen/example/*/v1/*_resilient.pb.go")
	files = append(files, example...)
	if len(files) < 10 {
		t.Fatalf("found %d generated files", len(files))
	}
	bareNanos := regexp.MustCompile(`(Timeout|Backoff|Window|CoolDown|Threshold|Wait|Delay|TTL|Lease|Deadline|Pushback):\s+[1-9]\d*,`)
	literals := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for i, line := range strings.Split(string(data), "\n") {
			if literalStart.MatchString(line) {
				in, literals = true, literals+1
			}
			if !in {
				continue
			}
			if w := len(strings.ReplaceAll(line, "\t", "    ")); w > 100 {
				t.Errorf("%s:%d: %d columns: %s", name, i+1, w, line)
			}
			if bareNanos.MatchString(line) {
				t.Errorf("%s:%d: a duration without its unit: %s", name, i+1, line)
			}
			if line == "}" {
				in = false
			}
		}
	}
	if literals < 20 {
		t.Errorf("checked %d literals, want every generated one", literals)
	}
}

// TestDurationExpr: the unit is the largest that divides the duration.
func TestDurationExpr(t *testing.T) {
	// durationExpr needs a GeneratedFile only to name package time.
	g := newTestFile(t)
	for d, want := range map[string]string{
		"0s": "0", "1ns": "time.Nanosecond", "1500ms": "1500 * time.Millisecond", "300ms": "300 * time.Millisecond",
		"24h": "24 * time.Hour", "90s": "90 * time.Second", "1m": "time.Minute", "2h30m": "150 * time.Minute",
		"1.000001s": "1000001 * time.Microsecond",
	} {
		if got := durationExpr(g, mustDuration(t, d)); got != want {
			t.Errorf("durationExpr(%s) = %s, want %s", d, got, want)
		}
	}
}

func newTestFile(t *testing.T) *protogen.GeneratedFile {
	t.Helper()
	plugin, err := protogen.Options{}.New(&pluginpb.CodeGeneratorRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return plugin.NewGeneratedFile("x.go", "x")
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
