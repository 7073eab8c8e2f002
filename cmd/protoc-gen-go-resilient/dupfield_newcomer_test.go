// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewcomerFieldWrittenTwice: the README ("1. Annotate") says the
// options are protobuf text format, "so the compiler (buf or protoc)
// checks their shape before the plugin sees them". A message-typed field
// written twice in one option (a retry block pasted below an edited one,
// a second timeout) is refused by protoc ("Non-repeated field "retry" is
// specified multiple times"), but buf 1.74, the version tools/go.mod pins,
// accepts it and merges the two: in a scratch module, `timeout: {seconds:
// 1}, timeout: {nanos: 5}` generated Timeout 1.000000005 s, and `retry:
// {max_attempts: 2} retry: {max_attempts: 4}` MaxAttempts 4, with no
// word. (A scalar written twice, idempotent, buf refuses.) The plugin
// receives the merged message and cannot tell; the README's mistakes
// should at least say so, or the plugin find the repeat in the option's
// bytes.
func TestNewcomerFieldWrittenTwice(t *testing.T) {
	t.Skip("BROKEN: buf (the pinned 1.74) accepts a message field written twice in an option and merges the two, silently; protoc refuses it")
	goBin, _ := goAndRepo(t, "building buf")
	cmd := exec.Command(goBin, "tool", "-modfile=tools/go.mod", "-n", "buf")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building buf: %v", err)
	}
	buf := strings.TrimSpace(string(out))
	example := readmeBlockTagged(t, "proto proto/shop/inventory/v1/inventory.proto")
	const once = "retry: {max_attempts: 2}"
	if strings.Count(example.body, once) != 1 {
		t.Fatalf("the README's example has no single %q any more", once)
	}
	options, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "buf.yaml"), []byte("version: v2\nmodules:\n  - path: proto\n  - path: third_party\n"))
	writeFile(t, filepath.Join(dir, "third_party", "resilient", "v1", "resilient.proto"), options)
	writeFile(t, filepath.Join(dir, "proto", "shop", "inventory", "v1", "inventory.proto"),
		[]byte(strings.Replace(example.body, once, once+"\n      retry: {max_attempts: 4}", 1)))
	build := exec.Command(buf, "build")
	build.Dir = dir
	var got bytes.Buffer
	build.Stdout, build.Stderr = &got, &got
	if err := build.Run(); err == nil {
		t.Errorf("buf build accepted ReserveStock's retry written twice (merged into max_attempts 4), want it refused as protoc refuses it")
	} else if !strings.Contains(got.String(), "retry") {
		t.Errorf("buf build refused the repeated retry without naming it: %s", got.String())
	}
}
