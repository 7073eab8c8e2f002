// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
)

// TestAttackR18cMemberNames: methods named like the client's members
// (Runtime, ResilientRuntime, Policy, Conn, Close, …) and like the
// generated code's locals, services named Conn, Policy and Runtime, a
// method without options in a service with them, each kind of stream,
// and a cached method whose request is a message of another package: the
// README promises the output compiles beside protoc-gen-go-grpc's.
func TestAttackR18cMemberNames(t *testing.T) {
	compileTestdata(t, "attack_r18c", "collide/members.proto", "other/other.proto")
}

// TestAttackR18cServicePair: a service X beside a service XResilient.
// protoc-gen-go-grpc declares XResilientClient and NewXResilientClient
// (the client of service XResilient), which are also the names of this
// plugin's client of X; and a message YResilientPolicy beside a service Y
// takes the name of Y's policy literal. The Go could not compile: the
// plugin refuses, at each service, naming the generated name and who else
// declares it, and writes nothing (it wrote code that failed to build).
func TestAttackR18cServicePair(t *testing.T) {
	resp := runPlugin(t, testdataRequest(t, "attack_r18c", "collide/pair.proto"))
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files for names that collide", len(resp.File))
	}
	want := "collide/pair.proto:10:1: resilienttest.r18c.pair.X: its resilient client declares XResilientClient, which protoc-gen-go-grpc for service resilienttest.r18c.pair.XResilient (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto\n" +
		"collide/pair.proto:10:1: resilienttest.r18c.pair.X: its resilient client declares NewXResilientClient, which protoc-gen-go-grpc for service resilienttest.r18c.pair.XResilient (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto\n" +
		"collide/pair.proto:25:1: resilienttest.r18c.pair.Y: its resilient client declares YResilientPolicy, which protoc-gen-go for message resilienttest.r18c.pair.YResilientPolicy (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto"
	if got := resp.GetError(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
