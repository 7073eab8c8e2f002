// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package policy holds the resilience policy of a service as plain values:
// what protoc-gen-go-resilient resolves from the annotations and prints as
// a Go literal (XxxResilientPolicy, a Service), what an operator edits with
// runtime.WithPolicy or an override file, and what runtime.NewClient
// applies. It holds no state and starts nothing; the machinery is the
// package runtime.
//
// Service holds the dependency's shared layers (Budget, Breaker, Bulkhead,
// RateLimit, AdaptiveLimit, ClientThrottle) and one Method per RPC, in the
// order of the .proto file; a Method holds its timeouts, Retry or Hedging,
// Cache, Priority and the layers it has of its own. Validate (and
// Problems, the same findings one by one) refuses a policy that cannot be
// applied, with the same wording as the plugin and the override loader,
// which refuse each value of the options with the same checks
// (GroupProblems); Clone copies one deeply.
//
// Server is the server side of the same annotations (XxxServerPolicy),
// which runtime/server's Guard applies: a service's Shedding limits and one
// ServerMethod per RPC, with its Priority, deadlines and Dedup. Its
// Validate refuses what NewGuard would.
//
// The package imports no Prometheus, no rate limiter and no gRPC
// transport, so that the plugin can build these values itself.
package policy
