// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// ValueLocation returns where the source info places the value at path
// ("retry.retryable_codes[1]") of the option whose source path is base
// (OptionsPath and the extension's number): the deepest place it has,
// which is the option statement for an option written as one message
// ({...}) and the field's own statement for one written field by field
// (option (resilient.v1.file).retry.max_attempts = 0); ok is false when
// it has neither. The code generator and the lint plugin both place a
// value so.
func ValueLocation(locs protoreflect.SourceLocations, base protoreflect.SourcePath, path string) (_ protoreflect.SourceLocation, ok bool) {
	want := append(append(protoreflect.SourcePath(nil), base...), FieldNumbers(path)...)
	var best protoreflect.SourceLocation
	bestLen := -1
	for i := range locs.Len() {
		loc := locs.Get(i)
		n := commonPrefix(loc.Path, want)
		if n < len(base) {
			continue
		}
		// A location inside the value (a field of it) stands for it when
		// nothing closer to it exists; one beside it does not.
		if n < len(loc.Path) && n < len(want) {
			continue
		}
		if n > bestLen {
			best, bestLen = loc, n
		}
	}
	return best, bestLen >= 0
}

func commonPrefix(a, b protoreflect.SourcePath) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// FieldNumbers turns a field path of the policy ("retry.retryable_codes[1]")
// into its source path below the option: field numbers and list indexes.
// It stops at the first part the policy does not have.
func FieldNumbers(path string) protoreflect.SourcePath {
	var out protoreflect.SourcePath
	if path == "" {
		return out
	}
	md := (&resilientv1.Policy{}).ProtoReflect().Descriptor()
	for _, part := range strings.Split(path, ".") {
		name, index, _ := strings.Cut(part, "[")
		if md == nil {
			break
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			break
		}
		out = append(out, int32(fd.Number()))
		if i, err := strconv.Atoi(strings.TrimSuffix(index, "]")); err == nil && index != "" {
			out = append(out, int32(i))
		}
		md = fd.Message()
	}
	return out
}
