// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package options holds the source of the options contract,
// resilient/v1/resilient.proto, so that protoc-gen-go-resilient can write
// the copy that matches its own version into a service's repository
// (protoc-gen-go-resilient -options-proto=DIR). The Go types of the
// contract are in the package resilientv1 below it.
package options

import (
	"embed"
	"io/fs"
)

//go:embed resilient/v1/*.proto
var files embed.FS

// Files returns the .proto files of the contract, by their import paths
// ("resilient/v1/resilient.proto").
func Files() fs.FS { return files }
