// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// buf-plugin-resilient is a buf check plugin: it runs the safety checks of
// protoc-gen-go-resilient on the (resilient.v1.*) options as lint rules,
// so that buf lint, editors and CI refuse an unsafe policy before anything
// is generated. The checks are the plugin's own (internal/rules); each
// rule has a stable ID that buf.yaml can except or ignore like buf's own:
//
//	lint:
//	  use: [STANDARD, RESILIENT]
//	plugins:
//	  - plugin: buf-plugin-resilient
//
// It is a module of its own so that bufplugin never reaches the users of
// the library or of protoc-gen-go-resilient.
package main

import (
	"buf.build/go/bufplugin/check"
	"pluginrpc.com/pluginrpc"
)

// main is check.Main(spec), the request first made readable
// (readable.go).
func main() {
	pluginrpc.Main(func() (pluginrpc.Server, error) {
		s, err := check.NewServer(spec)
		if err != nil {
			return nil, err
		}
		return readableServer{s}, nil
	})
}
