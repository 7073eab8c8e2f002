// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// protoc-gen-go-resilient is a protoc plugin that reads the (resilient.v1.*)
// options of gRPC services and generates, beside the protoc-gen-go-grpc
// output, a client per service that applies the annotated policy: timeouts,
// retries with a retry budget, circuit breakers and bulkheads.
//
// It refuses unsafe or impossible policies (retries of a method that is not
// idempotent, a per-attempt timeout longer than the whole call, ...) with
// one line per problem naming the file, line, column, service, method and
// option, and then writes nothing.
//
// With buf, add it to the plugins of buf.gen.yaml:
//
//	plugins:
//	  - local: ["go", "tool", "protoc-gen-go-resilient"]
//	    out: gen
//	    opt: paths=source_relative
//
// With protoc:
//
//	protoc --go-resilient_out=. path/to/file.proto
//
// which writes path/to/file_resilient.pb.go.
//
// The options contract the .proto files import is written, in the version
// that matches the plugin, by
//
//	protoc-gen-go-resilient -options-proto=DIR
//
// into DIR/resilient/v1/resilient.proto. An options proto newer than the
// plugin (a field the plugin does not know, set in a file) is refused.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/compiler/protogen"
)

// version is the version of the plugin, written into the header of every
// generated file.
const version = "0.1.0"

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	optionsProto := flag.String("options-proto", "", "write the options contract of this version, resilient/v1/resilient.proto, under `DIR` and exit")
	flag.Parse()
	if *showVersion {
		printVersion(os.Stdout)
		return
	}
	if *optionsProto != "" {
		if err := writeOptionsProto(*optionsProto, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "protoc-gen-go-resilient: %v\n", err)
			os.Exit(1)
		}
		return
	}

	// protogen handles the standard parameters (paths, module, M...); the
	// plugin's own choose the exports (exports.go), and an unknown one is
	// refused with the list of valid ones.
	var flags flag.FlagSet
	exports := newExportOptions(&flags)
	// protogen.Options.Run, but naming where an option does not parse.
	if err := run(protogen.Options{ParamFunc: paramFunc(&flags)}, &flags, flag.Args(), os.Stdin, os.Stdout, func(gen *protogen.Plugin) error {
		return generateWith(gen, exports)
	}); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(1)
	}
}

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "protoc-gen-go-resilient v%s\n", version)
}
