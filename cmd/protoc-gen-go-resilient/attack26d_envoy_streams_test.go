// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack26dStreamSrc: the service's per-attempt timeout (300 ms, for its
// unary calls) reaches every method; each stream sets an overall_timeout
// of its own (3 s), which, the README says (Streams), bounds the whole
// stream: "The method's overall_timeout, or else its timeout, bounds the
// whole stream." A stream is never retried, so a request through Envoy is
// the whole stream in either Envoy mode.
const attack26dStreamSrc = `syntax = "proto3";
package attack26d.streams;
import "resilient/v1/resilient.proto";
import "google/protobuf/empty.proto";
option go_package = "resilienttest/attack26d/streams";
service S {
  option (resilient.v1.service) = {timeout: {nanos: 300000000}};
  rpc Watch(google.protobuf.Empty) returns (stream google.protobuf.Empty) {
    option (resilient.v1.method) = {overall_timeout: {seconds: 3}};
  }
  rpc Upload(stream google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {overall_timeout: {seconds: 3}};
  }
  rpc Chat(stream google.protobuf.Empty) returns (stream google.protobuf.Empty) {
    option (resilient.v1.method) = {overall_timeout: {seconds: 3}};
  }
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty);
}
`

type attack26dRoute struct {
	Name  string
	Route struct {
		Timeout           string
		MaxStreamDuration struct {
			GrpcTimeoutHeaderMax string `yaml:"grpc_timeout_header_max"`
			MaxStreamDuration    string `yaml:"max_stream_duration"`
		} `yaml:"max_stream_duration"`
	}
}

func attack26dRoutes(t *testing.T, y string) map[string]attack26dRoute {
	t.Helper()
	var doc struct {
		Resources []struct {
			VirtualHosts []struct{ Routes []attack26dRoute } `yaml:"virtual_hosts"`
		}
	}
	if err := yaml.Unmarshal([]byte(y), &doc); err != nil {
		t.Fatalf("%v in:\n%s", err, y)
	}
	out := map[string]attack26dRoute{}
	for _, r := range doc.Resources[0].VirtualHosts[0].Routes {
		out[r.Name] = r
	}
	return out
}

// TestAttack26DEnvoyClientModeRouteCoversTheWholeStream: "Export: Envoy"
// promises that a route's timeout covers the policy's bound, and says that
// "with envoy_retries=client, a request through Envoy is one attempt:
// timeout". A stream is one attempt whatever the mode, and the Go client
// bounds it by its overall_timeout, not by the per-attempt timeout it
// inherits. With envoy_retries=envoy the stream routes say 3s; with
// envoy_retries=client they said the service's 300ms (route timeout,
// grpc_timeout_header_max, and for a client or bidirectional stream
// max_stream_duration): Envoy would cut at 300 ms a stream the Go client,
// on the same policy, lets answer after 700 ms (checked below on a
// loopback server).
func TestAttack26DEnvoyClientModeRouteCoversTheWholeStream(t *testing.T) {
	sp := todayResolve(t, attack26dStreamSrc)
	bounds := map[string]time.Duration{}
	kinds := map[string]policy.Kind{}
	for i := range sp.Policy.Methods {
		m := &sp.Policy.Methods[i]
		name := "attack26d.streams.S/" + m.Name[len("/attack26d.streams.S/"):]
		bounds[name], kinds[name] = bound.Call(m), m.Kind
	}
	for _, mode := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "s.proto", attack26dStreamSrc, mode)
		if perr != "" {
			t.Fatalf("%s: %s", mode, perr)
		}
		routes := attack26dRoutes(t, files["attack26d/streams/s.envoy.yaml"])
		for _, name := range slices.Sorted(maps.Keys(bounds)) {
			want := bounds[name]
			r, ok := routes[name]
			if !ok {
				t.Errorf("%s: no route %s", mode, name)
				continue
			}
			rt := a25eParseDur(t, r.Route.Timeout)
			if rt < want {
				t.Errorf("%s: route %s: timeout %v, but the Go client lets a call of it run %v (bound.Call): Envoy would cut what the client allows", mode, name, rt, want)
			}
			if g := a25eParseDur(t, r.Route.MaxStreamDuration.GrpcTimeoutHeaderMax); g < want {
				t.Errorf("%s: route %s: grpc_timeout_header_max %v, below the Go client's bound %v", mode, name, g, want)
			}
			if k := kinds[name]; k == policy.KindClientStreaming || k == policy.KindBidiStreaming {
				if msd := r.Route.MaxStreamDuration.MaxStreamDuration; msd == "" {
					t.Errorf("%s: route %s: no max_stream_duration for a %v stream", mode, name, k)
				} else if d := a25eParseDur(t, msd); d < want {
					t.Errorf("%s: route %s: max_stream_duration %v, below the Go client's bound %v", mode, name, d, want)
				}
			}
		}
	}

	// The Go client on the same policy: a server stream answered after
	// 700 ms ends OK, well past the 300 ms the client-mode route says.
	srv, addr := startCountingServer(t)
	srv.set(codes.OK, 700*time.Millisecond)
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := runtime.NewClient(&sp.Policy)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := c.Conn(cc).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/attack26d.streams.S/Watch")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(new(emptypb.Empty)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		err := s.RecvMsg(new(emptypb.Empty))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the Go client's stream ended with %v after %v, want OK after the server's 700 ms", err, time.Since(start))
		}
		got++
	}
	took := time.Since(start)
	if got != 1 || took < 700*time.Millisecond {
		t.Errorf("the Go client's stream got %d messages in %v, want 1 after at least 700 ms", got, took)
	}
	if n := srv.count("/attack26d.streams.S/Watch"); n != 1 {
		t.Errorf("the server saw %d streams, want 1", n)
	}
}
