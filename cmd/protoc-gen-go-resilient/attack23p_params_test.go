// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
)

// TestAttack23pParamsGivenTwiceOrForNothing: a buf.gen.yaml's opt list may
// hold a parameter twice (envoy_retries=client, and envoy_retries=envoy
// further down), and before, the last one won without a word: Envoy
// retried behind callers told the routes would not. And envoy_retries
// without envoy=true wrote no Envoy file and said nothing. Both are
// refused now, naming the parameter; the same value twice (docs and
// docs=true) is one.
func TestAttack23pParamsGivenTwiceOrForNothing(t *testing.T) {
	for _, tc := range []struct{ params, parseErr, genErr string }{
		{"envoy=true,envoy_retries=client,envoy_retries=envoy",
			"parameter envoy_retries is given twice, as envoy_retries=client and envoy_retries=envoy, and only the last would count: give it once", ""},
		{"service_config=true,service_config=false",
			"parameter service_config is given twice, as service_config=true and service_config=false, and only the last would count: give it once", ""},
		{"docs,docs=0",
			"parameter docs is given twice, as docs=true and docs=false, and only the last would count: give it once", ""},
		{"envoy_retries=client", "",
			"parameter envoy_retries=client chooses the layer that retries behind Envoy, for the routes that envoy=true writes, and envoy=true is not given, so no file would say it: add envoy=true, or remove envoy_retries"},
		{"envoy=false,envoy_retries=envoy", "",
			"parameter envoy_retries=envoy chooses the layer that retries behind Envoy, for the routes that envoy=true writes, and envoy=true is not given, so no file would say it: add envoy=true, or remove envoy_retries"},
		{"docs,docs=true,envoy_retries=client,envoy=true,envoy_retries=client", "", ""},
	} {
		req := testRequest(t, "export/export.proto")
		req.Parameter = new(*req.Parameter + "," + tc.params)
		var flags flag.FlagSet
		o := newExportOptions(&flags)
		gen, err := protogen.Options{ParamFunc: paramFunc(&flags)}.New(req)
		if tc.parseErr != "" {
			if err == nil || err.Error() != tc.parseErr {
				t.Errorf("%s: got error\n%v\nwant\n%s", tc.params, err, tc.parseErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.params, err)
		}
		if err := generateWith(gen, o); err != nil {
			gen.Error(err)
		}
		resp := gen.Response()
		if resp.GetError() != tc.genErr {
			t.Errorf("%s: got error\n%s\nwant\n%s", tc.params, resp.GetError(), tc.genErr)
		}
		if tc.genErr != "" && len(resp.File) != 0 {
			t.Errorf("%s: refused, but wrote %d files", tc.params, len(resp.File))
		}
		if tc.genErr == "" && len(resp.File) != 3 {
			t.Errorf("%s: wrote %d files, want the client, the Envoy file and the page", tc.params, len(resp.File))
		}
	}
}
