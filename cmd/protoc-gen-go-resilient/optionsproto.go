// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-resilient/resilient/options"
)

// writeOptionsProto writes the options contract of this version of the
// plugin under dir, at its import path (dir/resilient/v1/resilient.proto),
// replacing an older copy, and names each file written on w. A service's
// repository imports the copy from its buf module or protoc -I path and
// uses the Go types of this module for it; it never generates Go for it.
func writeOptionsProto(dir string, w io.Writer) error {
	if dir == "" {
		return fmt.Errorf("-options-proto needs a directory: -options-proto=DIR writes DIR/resilient/v1/resilient.proto")
	}
	header := fmt.Appendf(nil, "// Written by protoc-gen-go-resilient v%s -options-proto: the options\n"+
		"// contract of that version. Do not edit; after upgrading the plugin, run\n"+
		"// the same command again. Its Go types are\n"+
		"// github.com/go-resilient/resilient/options/resilient/v1: do not generate\n"+
		"// Go for this file.\n\n", version)
	return fs.WalkDir(options.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := fs.ReadFile(options.Files(), path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("-options-proto: %w", err)
		}
		if err := os.WriteFile(dst, bytes.Join([][]byte{header, src}, nil), 0o644); err != nil {
			return fmt.Errorf("-options-proto: %w", err)
		}
		fmt.Fprintf(w, "wrote %s\n", dst)
		return nil
	})
}
