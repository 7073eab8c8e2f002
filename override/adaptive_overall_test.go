// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package override_test

import (
	"testing"

	"github.com/go-resilient/resilient/override"
)

// TestOverrideTimeoutAsLongAsOverallUnderAdaptiveLimit: an override that
// leaves a method under an adaptive limit (the service's or its own) with
// a timeout as long as its overall_timeout is refused, as the plugin
// refuses the annotation: no attempt would get a timeout of its own, so a
// hung dependency would never make the limit fall. The problem is
// reported at the override that made it so (overall_timeout beside the
// annotated 300 ms timeout, or both written together), in the words of
// the runtime's check; an overall_timeout a little longer passes.
func TestOverrideTimeoutAsLongAsOverallUnderAdaptiveLimit(t *testing.T) {
	const svc = `o.yaml: services."example.inventory.v1.InventoryService".`
	const why = "no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, " +
		"so a dependency that hangs never makes it fall; shorten timeout below overall_timeout or lengthen overall_timeout, or remove the adaptive limit"
	for _, tc := range []struct{ name, body, want string }{
		{"overall_timeout as long as the annotated timeout, the service's limit",
			"adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {overall_timeout: 300ms}",
			svc + "methods.GetStock.overall_timeout: GetStock's timeout 300ms is as long as its overall_timeout 300ms: " + why},
		{"both written as long, the service's limit",
			"adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {timeout: 1s, overall_timeout: 1s}",
			svc + "methods.GetStock.timeout: GetStock's timeout 1s is as long as its overall_timeout 1s: " + why},
		{"only the method that breaks it",
			"adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {overall_timeout: 1s}\n      ReserveStock: {overall_timeout: 300ms}",
			svc + "methods.ReserveStock.overall_timeout: ReserveStock's timeout 300ms is as long as its overall_timeout 300ms: " + why},
		{"the method's own limit",
			"methods:\n      GetStock: {adaptive_limit: {per_method: true}, overall_timeout: 300ms}",
			svc + "methods.GetStock.overall_timeout: GetStock's timeout 300ms is as long as its overall_timeout 300ms: " + why},
		{"overall_timeout longer passes", "adaptive_limit: {tolerance: 2}\n    methods:\n      GetStock: {overall_timeout: 301ms}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "services:\n  example.inventory.v1.InventoryService:\n    " + tc.body + "\n"
			_, err := override.Parse("o.yaml", []byte(body), nil, inventory)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("%s:\n got %v\nwant %q", tc.body, err, tc.want)
			}
		})
	}
}
