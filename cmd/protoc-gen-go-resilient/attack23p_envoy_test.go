// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/runtime"
)

const attack23pDeadlineSrc = `syntax = "proto3";
package attack23p.deadline;
import "resilient/v1/resilient.proto";
import "google/protobuf/empty.proto";
option go_package = "resilienttest/attack23p/deadline";
service S {
  // No per-attempt timeout: the whole call's cuts the one attempt.
  rpc Overall(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {overall_timeout: {nanos: 200000000}, retry: {retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  // A timeout as long as the overall one: the overall one cuts first.
  rpc Same(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 200000000}, overall_timeout: {nanos: 200000000}, retry: {retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  // No timeout at all, UNAVAILABLE beside it.
  rpc Untimed(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {retryable_codes: ["DEADLINE_EXCEEDED", "UNAVAILABLE"]}};
  }
  // The control: attempts of 100 ms within a call of 1 s.
  rpc Timed(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 100000000}, overall_timeout: {seconds: 1}, retry: {retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
}
`

// envoyRouteOf is the text of the route named name (without the header
// routes of a keyed method) in an Envoy export.
func envoyRouteOf(t *testing.T, y, name string) string {
	t.Helper()
	start := strings.Index(y, "- name: "+name+"\n")
	if start < 0 {
		t.Fatalf("no route %s in:\n%s", name, y)
	}
	route := y[start+1:]
	if end := strings.Index(route, "\n    - name: "); end >= 0 {
		route = route[:end]
	}
	if end := strings.Index(route, "\n- \"@type\""); end >= 0 {
		route = route[:end]
	}
	return route
}

// TestAttack23pEnvoyDeadlineExceededNeedsAnAttemptTimeout: the generated
// client retries DEADLINE_EXCEEDED only when an attempt's own timeout
// expired, so a method whose attempts have none (no timeout, or one the
// overall_timeout cuts first) never retries on it; the service config
// drops it. Envoy's route mapped it to gateway-error all the same, which
// without a per_try_timeout never sees an attempt expire but retries
// what the Go client does not: an upstream reset or a failed connection
// (gateway-error includes them). Before, the Overall route retried 2
// times where the Go client, on the same policy, sends 1 attempt.
func TestAttack23pEnvoyDeadlineExceededNeedsAnAttemptTimeout(t *testing.T) {
	files, perr := attackProto(t, "d.proto", attack23pDeadlineSrc, "envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	y := files["attack23p/deadline/d.envoy.yaml"]
	for _, name := range []string{"Overall", "Same"} {
		route := envoyRouteOf(t, y, "attack23p.deadline.S/"+name)
		if strings.Contains(route, "retry_policy:\n") || strings.Contains(route, "gateway-error") {
			t.Errorf("%s: its attempts have no timeout of their own, and the Go client never retries it, but the route retries:\n%s", name, route)
		}
		if !strings.Contains(route, "# no retry_policy: DEADLINE_EXCEEDED is retried by the clients only when an attempt's own timeout expired") {
			t.Errorf("%s: the route does not say why it has no retry_policy:\n%s", name, route)
		}
	}
	untimed := envoyRouteOf(t, y, "attack23p.deadline.S/Untimed")
	if !strings.Contains(untimed, "retry_on: unavailable,connect-failure,refused-stream,reset\n") {
		t.Errorf("Untimed: UNAVAILABLE's retries are not all the route retries on:\n%s", untimed)
	}
	if !strings.Contains(untimed, "# not retried: DEADLINE_EXCEEDED") {
		t.Errorf("Untimed: the route does not say why DEADLINE_EXCEEDED is not retried:\n%s", untimed)
	}
	timed := envoyRouteOf(t, y, "attack23p.deadline.S/Timed")
	if !strings.Contains(timed, "retry_on: gateway-error\n") || !strings.Contains(timed, "per_try_timeout: 0.100s\n") {
		t.Errorf("Timed: an attempt's own timeout can expire, and the route must retry it as the Go client does:\n%s", timed)
	}

	// The Go client on the same policy, against a server that never
	// answers: Overall and Same are sent once, Timed once per attempt.
	srv, addr := startCountingServer(t)
	srv.set(codes.OK, time.Minute) // hangs until the call's context ends
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sp := todayResolve(t, attack23pDeadlineSrc)
	c, err := runtime.NewClient(&sp.Policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		calls int
	}{{"Overall", 1}, {"Same", 1}, {"Timed", 3}} {
		method := "/attack23p.deadline.S/" + tc.name
		var attempts atomic.Int64 // counted at the client: a loaded machine may cut an attempt before it reaches the server
		h, err := runtime.NewUnary(c, method, func(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*emptypb.Empty, error) {
			attempts.Add(1)
			out := new(emptypb.Empty)
			return out, cc.Invoke(ctx, method, in, out, opts...)
		}, runtime.UnaryHooks[emptypb.Empty, emptypb.Empty]{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = h.Call(ctx, new(emptypb.Empty))
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: %v, want DEADLINE_EXCEEDED", tc.name, err)
		}
		if got := attempts.Load(); got != int64(tc.calls) {
			t.Errorf("%s: the Go client made %d attempts, want %d", tc.name, got, tc.calls)
		}
		if got := srv.count(method); got < 1 || got > tc.calls {
			t.Errorf("%s: the server saw %d attempts of the Go client, want 1 to %d", tc.name, got, tc.calls)
		}
	}
}

const attack23pStreamSrc = `syntax = "proto3";
package attack23p.streams;
import "resilient/v1/resilient.proto";
import "google/protobuf/empty.proto";
option go_package = "resilienttest/attack23p/streams";
service S {
  option (resilient.v1.service) = {timeout: {nanos: 200000000}};
  rpc Upload(stream google.protobuf.Empty) returns (google.protobuf.Empty);
  rpc Chat(stream google.protobuf.Empty) returns (stream google.protobuf.Empty);
  rpc Watch(google.protobuf.Empty) returns (stream google.protobuf.Empty);
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty);
}
`

// TestAttack23pEnvoyBoundsTheWholeClientStream: the Go client bounds a
// stream, from its opening, by the method's overall_timeout or else its
// timeout, also while the caller is still sending. Envoy's route timeout
// starts only once the whole request is in, so a client or bidirectional
// stream whose caller keeps sending, and sends no grpc-timeout, was never
// cut: the route now sets max_stream_duration too (a grpc-timeout still
// shortens it, up to grpc_timeout_header_max). A server stream and a
// unary call, whose request is in at once, need none.
func TestAttack23pEnvoyBoundsTheWholeClientStream(t *testing.T) {
	files, perr := attackProto(t, "s.proto", attack23pStreamSrc, "envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	y := files["attack23p/streams/s.envoy.yaml"]
	for _, tc := range []struct {
		method string
		whole  bool
	}{{"Upload", true}, {"Chat", true}, {"Watch", false}, {"Get", false}} {
		route := envoyRouteOf(t, y, "attack23p.streams.S/"+tc.method)
		has := strings.Contains(route, "\n          max_stream_duration: 0.200s # the whole stream")
		if has != tc.whole {
			t.Errorf("%s: max_stream_duration of the whole stream written %v, want %v:\n%s", tc.method, has, tc.whole, route)
		}
	}

	// The Go client on the same policy: a client stream whose caller
	// keeps sending to a server that reads one message and then waits
	// ends at its timeout, 200 ms after it opened.
	srv, addr := startCountingServer(t)
	srv.set(codes.OK, time.Minute)
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sp := todayResolve(t, attack23pStreamSrc)
	c, err := runtime.NewClient(&sp.Policy)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := c.Conn(cc).NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/attack23p.streams.S/Upload")
	if err != nil {
		t.Fatal(err)
	}
	for time.Since(start) < 5*time.Second {
		if s.SendMsg(new(emptypb.Empty)) != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	err = s.RecvMsg(new(emptypb.Empty))
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("the stream the caller kept sending on ended with %v, want DEADLINE_EXCEEDED", err)
	}
	if took < 200*time.Millisecond || took > 200*time.Millisecond+500*time.Millisecond {
		t.Errorf("the stream the caller kept sending on ended after %v, want its timeout, 200 ms", took)
	}
}

// TestAttack23pEnvoyFailurePercentageNeverZero: a breaker's failure_ratio
// may be any value in (0, 1], and Envoy's failure_percentage_threshold is a
// whole percentage that ejects a host whose failures reach it. Before, a
// ratio below 0.005 was rounded to 0, with which Envoy ejects every host
// that served failure_percentage_request_volume calls, all of them
// succeeding: the breaker that opens at 0.4 % of failures became one that
// is open without any. It is 1 now, with a comment; 0.5 stays 50.
func TestAttack23pEnvoyFailurePercentageNeverZero(t *testing.T) {
	for _, tc := range []struct{ ratio, want string }{
		{"0.004", "failure_percentage_threshold: 1 # failure_ratio 0.004, below the whole percentage Envoy takes (0 would eject every host, failing or not)\n"},
		{"1e-9", "failure_percentage_threshold: 1 # failure_ratio 1e-09, below the whole percentage Envoy takes"},
		{"0.005", "failure_percentage_threshold: 1 # failure_ratio 0.005\n"},
		{"0.5", "failure_percentage_threshold: 50 # failure_ratio 0.5\n"},
		{"1", "failure_percentage_threshold: 100 # failure_ratio 1\n"},
	} {
		src := `syntax = "proto3";
package attack23p.ratio;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack23p/ratio";
service S {
  option (resilient.v1.service) = {circuit_breaker: {failure_ratio: ` + tc.ratio + `}};
  rpc Get(M) returns (M);
}
message M {}
`
		files, perr := attackProto(t, "r.proto", src, "envoy=true")
		if perr != "" {
			t.Fatalf("%s: %s", tc.ratio, perr)
		}
		y := files["attack23p/ratio/r.envoy.yaml"]
		if !strings.Contains(y, "\n    "+tc.want) {
			t.Errorf("failure_ratio %s: want %q in:\n%s", tc.ratio, tc.want, y)
		}
		if strings.Contains(y, "failure_percentage_threshold: 0 ") {
			t.Errorf("failure_ratio %s: a threshold of 0 ejects every host:\n%s", tc.ratio, y)
		}
	}
}

// TestAttack23pEnvoySubMillisecondTimeouts: Envoy reads a route's timeout,
// per_try_timeout and grpc_timeout_header_max in whole milliseconds,
// truncated, and takes 0 for none. Before, a timeout of 500µs was written
// as 0.000500s, which Envoy reads as 0: a route without any timeout, an
// attempt without its own, and a caller's grpc-timeout not capped, where
// the Go client cuts the call at 500µs. It is 1ms now, with a comment;
// 1ms and more are written as they are.
func TestAttack23pEnvoySubMillisecondTimeouts(t *testing.T) {
	src := `syntax = "proto3";
package attack23p.ms;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack23p/ms";
service S {
  rpc Get(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 500000}};
  }
  rpc List(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 300000}, overall_timeout: {nanos: 900000}, retry: {max_attempts: 2}};
  }
  rpc Put(M) returns (M) {
    option (resilient.v1.method) = {timeout: {nanos: 1000000}};
  }
}
message M {}
`
	for _, params := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "ms.proto", src, params)
		if perr != "" {
			t.Fatal(perr)
		}
		y := files["attack23p/ms/ms.envoy.yaml"]
		for _, name := range []string{"Get", "List", "Put"} {
			route := envoyRouteOf(t, y, "attack23p.ms.S/"+name)
			if !strings.Contains(route, "\n        timeout: 0.001s #") || !strings.Contains(route, "grpc_timeout_header_max: 0.001s #") {
				t.Errorf("%s, %s: the route is not cut at 1ms:\n%s", params, name, route)
			}
			if strings.Contains(route, "0.000") {
				t.Errorf("%s, %s: a timeout below 1ms, which Envoy reads as none:\n%s", params, name, route)
			}
		}
		list := envoyRouteOf(t, y, "attack23p.ms.S/List")
		// 300µs is Envoy's 1ms, the route's whole timeout: no attempt
		// timeout of its own (TestAttack24fEnvoyRoundingKeepsTheOverallBound).
		if params == "envoy=true" && (strings.Contains(list, "\n          per_try_timeout: ") || !strings.Contains(list, "# no per_try_timeout: timeout 300µs is 1ms in Envoy's whole milliseconds")) {
			t.Errorf("%s: List's attempts are given a per_try_timeout as long as the route's:\n%s", params, list)
		}
	}
}

// TestAttack23pEnvoySubMillisecondBreaker: the breaker's window and
// cool_down become outlier_detection's interval and base_ejection_time,
// which Envoy also reads in whole milliseconds: a window of 500µs was
// written as 0.000500s, an interval of 0 ms. They are 1ms now.
func TestAttack23pEnvoySubMillisecondBreaker(t *testing.T) {
	src := `syntax = "proto3";
package attack23p.msbreaker;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack23p/msbreaker";
service S {
  option (resilient.v1.service) = {circuit_breaker: {window: {nanos: 500000}, cool_down: {nanos: 999999}}};
  rpc Get(M) returns (M);
}
message M {}
`
	files, perr := attackProto(t, "b.proto", src, "envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	y := files["attack23p/msbreaker/b.envoy.yaml"]
	for _, want := range []string{
		"\n    interval: 0.001s # window 500µs, rounded up: Envoy reads it in whole milliseconds\n",
		"\n    base_ejection_time: 0.001s # cool_down 999.999µs, rounded up: Envoy reads it in whole milliseconds\n",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("want %q in:\n%s", want, y)
		}
	}
}
