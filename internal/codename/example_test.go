// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package codename_test

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
)

func ExampleParse() {
	for _, name := range []string{"RESOURCE_EXHAUSTED", "CANCELLED", "OK", "Unavailable"} {
		c, ok := codename.Parse(name)
		fmt.Println(name, c, ok)
	}
	fmt.Println(codename.Of(codes.DeadlineExceeded))
	// Output:
	// RESOURCE_EXHAUSTED ResourceExhausted true
	// CANCELLED Canceled true
	// OK OK true
	// Unavailable OK false
	// DEADLINE_EXCEEDED
}
