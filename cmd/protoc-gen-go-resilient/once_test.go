// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

// TestServiceValueWrongForManyMethodsIsOneRefusal: a value of the service
// wrong in the same words for several of its methods is refused once, at
// the service's option, naming the methods (all of them: "each method"),
// not once a method at the same option. Two services whose own values are
// wrong in the same words are two refusals, each at its service: neither
// is the file's value. Lint finds the same (TestLintAgrees runs on these
// inputs too).
func TestServiceValueWrongForManyMethodsIsOneRefusal(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"service_value_each_method", "refuse/service_value_each_method.proto:10:3: resilienttest.refuse.service_value_each_method.Svc: (resilient.v1.service).timeout: in each method, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout"},
		{"service_value_some_methods", "refuse/service_value_some_methods.proto:10:3: resilienttest.refuse.service_value_some_methods.Svc: (resilient.v1.service).timeout: in Get and List, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout"},
		{"service_values_alike_in_two_services", "refuse/service_values_alike_in_two_services.proto:10:3: resilienttest.refuse.service_values_alike_in_two_services.Orders: (resilient.v1.service).timeout: in each method, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout\n" +
			"refuse/service_values_alike_in_two_services.proto:17:3: resilienttest.refuse.service_values_alike_in_two_services.Payments: (resilient.v1.service).timeout: in each method, 2s is longer than overall_timeout 1s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout"},
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
