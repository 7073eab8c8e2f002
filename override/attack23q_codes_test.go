// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
)

// TestAttack23qOverrideCodeListedTwice: the override loader runs the
// plugin's check of a list of codes (rules.Check), so a code listed twice,
// in the file or in a variable, is refused at its index, naming the key
// and the code, as the plugin refuses it in an annotation.
func TestAttack23qOverrideCodeListedTwice(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		want       string
	}{
		{"retryable on a method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: [UNAVAILABLE, UNAVAILABLE]}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.retry.retryable_codes[1]: "UNAVAILABLE" is listed twice: remove the repeat`},
		{"failure codes on the service", `{services: {example.inventory.v1.InventoryService: {circuit_breaker: {failure_codes: [DEADLINE_EXCEEDED, UNAVAILABLE, DEADLINE_EXCEEDED]}}}}`, nil,
			`overrides.yaml: ` + inv + `.circuit_breaker.failure_codes[2]: "DEADLINE_EXCEEDED" is listed twice: remove the repeat`},
		{"non-fatal codes on a method", `{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {hedging: {non_fatal_codes: [INTERNAL, INTERNAL]}}}}}}`, nil,
			`overrides.yaml: ` + inv + `.methods.GetStock.hedging.non_fatal_codes[1]: "INTERNAL" is listed twice: remove the repeat`},
		{"env retryable", "", []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=UNAVAILABLE,RESOURCE_EXHAUSTED,UNAVAILABLE"},
			`RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES[2]: "UNAVAILABLE" is listed twice: remove the repeat`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := override.Parse("overrides.yaml", []byte(tc.file), tc.env, inventory, payments)
			if err == nil {
				t.Fatalf("accepted (%v), want an error containing %q", s.Keys(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant one containing:\n%s", err, tc.want)
			}
		})
	}
}
