// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

// TestFix19FileValueWrongForManyServicesIsOneRefusal: a value of the file
// wrong in the same words for several of its services is refused once, at
// the file's option, naming where it holds (every method of every
// service: "each service"; some: the services wholly concerned and the
// methods of the others), not once a service at the same line. Lint finds
// the same (TestLintAgrees runs on these inputs too).
func TestFix19FileValueWrongForManyServicesIsOneRefusal(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"file_value_each_service", "refuse/file_value_each_service.proto:9:1: resilienttest.refuse.file_value_each_service: (resilient.v1.file).timeout: in each service, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout"},
		{"file_value_some_services", "refuse/file_value_some_services.proto:9:1: resilienttest.refuse.file_value_some_services: (resilient.v1.file).timeout: in Orders.Get, Orders.List and Payments, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := runPlugin(t, testRequest(t, "refuse/"+tc.name+".proto"))
			if len(resp.File) != 0 {
				t.Errorf("a refused policy still gave %d files", len(resp.File))
			}
			if got := resp.GetError(); got != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
