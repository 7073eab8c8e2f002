// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// a27hHang is the delay of a reply that never comes: the server waits
// until the caller gives up.
const a27hHang = time.Hour

// a27hReply is what the server answers one request with: code after the
// delay, with a grpc-retry-pushback-ms trailer when pushback is set.
type a27hReply struct {
	code     codes.Code
	after    time.Duration
	pushback string
}

// a27hServer is a loopback gRPC server that answers each request as its
// script says, from the method and the request's number (1 for the first
// of the method since the last reset), and records when each arrived.
type a27hServer struct {
	mu     sync.Mutex
	script func(method string, n int) a27hReply
	at     map[string][]time.Time
}

func a27hStart(t *testing.T) (*a27hServer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &a27hServer{at: map[string][]time.Time{}, script: func(string, int) a27hReply { return a27hReply{} }}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(s.handle))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s, lis.Addr().String()
}

func (s *a27hServer) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	s.mu.Lock()
	s.at[method] = append(s.at[method], time.Now())
	r := s.script(method, len(s.at[method]))
	s.mu.Unlock()
	if r.after > 0 {
		timer := time.NewTimer(r.after)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	if r.pushback != "" {
		stream.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", r.pushback))
	}
	if r.code != codes.OK {
		return status.Error(r.code, "as the test's script says")
	}
	return stream.SendMsg(new(emptypb.Empty))
}

// reset forgets the requests seen and answers by script from now on.
func (s *a27hServer) reset(script func(method string, n int) a27hReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.at = script, map[string][]time.Time{}
}

// arrivals returns when each request of method since the last reset came.
func (s *a27hServer) arrivals(method string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[method]...)
}

// a27hResolve compiles src as name and returns the plugin's resolution of
// every service of it, in order.
func a27hResolve(t *testing.T, name, src string) []*service {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, name), []byte(src))
	gen, err := protogen.Options{}.New(compileRequest(t, "module="+testModule, []string{dir, "../../options"}, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			ps := &problems{}
			out := resolveFile(f, ps)
			return out
		}
	}
	t.Fatal("no file to generate")
	return nil
}

// a27hMethod returns the policy of the method named full in sp.
func a27hMethod(t *testing.T, sp *service, full string) *policy.Method {
	t.Helper()
	for i := range sp.Policy.Methods {
		if sp.Policy.Methods[i].Name == full {
			return &sp.Policy.Methods[i]
		}
	}
	t.Fatalf("no method %s in %s", full, sp.Policy.Name)
	return nil
}

// a27hGoUnary returns a call of the unary method full through a runtime
// client of sp's policy, as the generated client makes it (a keyed method
// gets the key "key-1" from its request), on cc. Each call gets a client
// of its own: its own budget and breaker.
func a27hGoUnary(t *testing.T, sp *service, cc *grpc.ClientConn, full string) func(context.Context) error {
	t.Helper()
	return func(ctx context.Context) error {
		c, err := runtime.NewClient(&sp.Policy)
		if err != nil {
			t.Fatal(err)
		}
		h, err := runtime.NewUnary(c, full, func(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*emptypb.Empty, error) {
			out := new(emptypb.Empty)
			return out, cc.Invoke(ctx, full, in, out, opts...)
		}, runtime.UnaryHooks[emptypb.Empty, emptypb.Empty]{IdempotencyKey: func(*emptypb.Empty) string { return "key-1" }})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Call(ctx, new(emptypb.Empty))
		return err
	}
}

// a27hPlainUnary returns a call of full on a channel that loaded the
// service config, sending the idempotency-key header as a caller's own
// code might.
func a27hPlainUnary(cc *grpc.ClientConn, full string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", "key-1")
		return cc.Invoke(ctx, full, new(emptypb.Empty), new(emptypb.Empty))
	}
}

// a27hTimed runs call under a 10 s deadline of the caller's own and
// returns its error and how long it took.
func a27hTimed(call func(context.Context) error) (error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	return err, time.Since(start)
}

// a27hCombosSrc combines, method by method, what the brief of this attack
// lists: retries on DEADLINE_EXCEEDED alone and with UNAVAILABLE, an
// overall_timeout equal to the timeout, longer than all attempts, and
// between (shorter than the attempts' sum; one shorter than the timeout
// the plugin refuses),
// keyed and generated keys, hedging whose non-fatal code is
// DEADLINE_EXCEEDED alone, more than gRPC's 5 attempts, and a stream of a
// service that retries.
const a27hCombosSrc = `syntax = "proto3";
package resilienttest.a27h;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a27h";
message Req { string k = 1; }
service Combos {
  option (resilient.v1.service) = {retry_budget: {ratio: 1, min_retries: 500}};
  rpc OnlyDE(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 60000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc OnlyDEOverallShorter(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 60000000}, overall_timeout: {nanos: 90000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc OnlyDEOverallLonger(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 40000000}, overall_timeout: {nanos: 300000000}, retry: {max_attempts: 4, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc OnlyDEOverallEqual(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 60000000}, overall_timeout: {nanos: 60000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc Both(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 40000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc BothOverallLonger(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 40000000}, overall_timeout: {nanos: 150000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED", "UNAVAILABLE"]}};
  }
  rpc BothOverallShorter(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 40000000}, overall_timeout: {nanos: 70000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc KeyedDE(Req) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotency_key: "k", timeout: {nanos: 50000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc KeyedBoth(Req) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotency_key: "k", timeout: {nanos: 50000000}, overall_timeout: {nanos: 200000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc GeneratedBoth(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {generate_idempotency_key: true, timeout: {nanos: 50000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc HedgedDE(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 60000000}, hedging: {delay: {nanos: 20000000}, max_copies: 3, non_fatal_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc Eight(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 20000000}, retry: {max_attempts: 8, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
}
service Streams {
  option (resilient.v1.service) = {idempotent: true, timeout: {nanos: 60000000}, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  rpc Watch(google.protobuf.Empty) returns (stream google.protobuf.Empty) {}
  rpc WatchLong(google.protobuf.Empty) returns (stream google.protobuf.Empty) {
    option (resilient.v1.method) = {overall_timeout: {nanos: 150000000}};
  }
}
`

// TestAttack27HServiceConfigAgainstTheGoClient loads the exported service
// config of every combination above into a plain grpc-go channel and, on a
// loopback server that answers UNAVAILABLE, its own DEADLINE_EXCEEDED or
// INTERNAL at once, or hangs, compares what the server sees from it with
// what it sees from the runtime client of the same annotation. README
// (Export: gRPC service config): a caller of the file never repeats what
// the Go client would not (a keyed method, a code the policy does not
// list, the server's own DEADLINE_EXCEEDED), and a hung call runs no
// longer than the Go client lets it (a method retried on
// DEADLINE_EXCEEDED alone: one attempt's timeout).
func TestAttack27HServiceConfigAgainstTheGoClient(t *testing.T) {
	files, perr := attackProto(t, "a27h.proto", a27hCombosSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	scJSON := files["a27h/a27h.service_config.json"]
	mcs := parseServiceConfig(t, scJSON)
	sp := a27hResolve(t, "a27h.proto", a27hCombosSrc)[0]
	const svc = "resilienttest.a27h.Combos"
	for _, name := range []string{"OnlyDE", "OnlyDEOverallShorter", "OnlyDEOverallLonger", "OnlyDEOverallEqual",
		"Both", "BothOverallLonger", "BothOverallShorter", "KeyedDE", "KeyedBoth", "GeneratedBoth", "HedgedDE", "Eight"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			full := "/" + svc + "/" + name
			mp := a27hMethod(t, sp, full)
			goBound := bound.Call(mp)
			mc, ok := mcs[svc+"/"+name]
			if !ok {
				t.Fatalf("no methodConfig in:\n%s", scJSON)
			}
			exported := a25eParseDur(t, mc.Timeout)
			// The README: the Go client's bound, each backoff counted
			// at 1.2 × its bound, as grpc-go draws it.
			allowed := goBound
			if r := mp.Retry; r != nil && mp.Hedging == nil {
				c, rr := *mp, *r
				rr.InitialBackoff, rr.MaxBackoff = rr.InitialBackoff*6/5, rr.MaxBackoff*6/5
				c.Retry = &rr
				allowed = bound.Call(&c)
			}
			if exported > allowed {
				t.Errorf("exported timeout %v is longer than the Go client lets a call run (%v), with gRPC's backoffs (%v)", exported, goBound, allowed)
			}
			srv, addr := a27hStart(t)
			plain := a27hPlainUnary(attack25eDial(t, addr, scJSON), full)
			goCall := a27hGoUnary(t, sp, attack25eDial(t, addr, ""), full)
			listed := func(c codes.Code) bool {
				if mp.Retry != nil && mp.Retry.MaxAttempts > 1 {
					return mp.Retry.RetryableCodes.Has(c)
				}
				return false
			}
			for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Internal} {
				var err, gerr error
				var gotPlain, gotGo int
				for try := range 3 {
					srv.reset(func(string, int) a27hReply { return a27hReply{code: code} })
					err, _ = a27hTimed(plain)
					gotPlain = len(srv.arrivals(full))
					srv.reset(func(string, int) a27hReply { return a27hReply{code: code} })
					gerr, _ = a27hTimed(goCall)
					gotGo = len(srv.arrivals(full))
					// An attempt of 20 to 60 ms may time out on a loaded
					// machine before the server's answer: try again.
					if code == codes.DeadlineExceeded || status.Code(err) != codes.DeadlineExceeded && status.Code(gerr) != codes.DeadlineExceeded {
						break
					}
					t.Logf("server's %v, try %d: a timeout of the load (file %v, Go %v)", code, try+1, err, gerr)
				}
				if status.Code(err) != code || status.Code(gerr) != code {
					t.Errorf("server's %v: the caller of the file got %v, the Go client %v", code, err, gerr)
				}
				if gotPlain > gotGo {
					t.Errorf("server's %v: the caller of the file sent %d attempts, the Go client %d: the file repeats what the Go client does not", code, gotPlain, gotGo)
				}
				if (code != codes.Unavailable || !listed(code) || mc.RetryPolicy == nil) && gotPlain != 1 {
					t.Errorf("server's %v: the caller of the file sent %d attempts, want 1 (not listed, the server's own DEADLINE_EXCEEDED, or no retryPolicy)", code, gotPlain)
				}
				if code == codes.DeadlineExceeded && gotGo != 1 {
					t.Errorf("the server's own DEADLINE_EXCEEDED: the Go client sent %d attempts, want 1 (README: never retried)", gotGo)
				}
			}
			// A hung server: the caller of the file is cut at the exported
			// timeout, never later than the Go client's bound.
			srv.reset(func(string, int) a27hReply { return a27hReply{after: a27hHang} })
			err, took := a27hTimed(plain)
			gotPlain := len(srv.arrivals(full))
			srv.reset(func(string, int) a27hReply { return a27hReply{after: a27hHang} })
			gerr, gtook := a27hTimed(goCall)
			gotGo := len(srv.arrivals(full))
			const slack = 250 * time.Millisecond // 2 shared cores, -race
			if status.Code(err) != codes.DeadlineExceeded || took < exported || took > exported+slack {
				t.Errorf("hung: the caller of the file got %v after %v, want DEADLINE_EXCEEDED at its exported %v", err, took, exported)
			}
			if took > goBound+slack {
				t.Errorf("hung: the caller of the file ran %v, longer than the Go client's bound %v", took, goBound)
			}
			if status.Code(gerr) != codes.DeadlineExceeded || gtook > goBound+slack {
				t.Errorf("hung: the Go client got %v after %v, want DEADLINE_EXCEEDED within its bound %v", gerr, gtook, goBound)
			}
			if gotPlain != 1 {
				t.Errorf("hung: the caller of the file sent %d attempts, want 1 (gRPC has no attempt timeout)", gotPlain)
			}
			t.Logf("exported %s (retryPolicy %v, hedgingPolicy %v); hung: file %d attempt(s) in %v, Go %d in %v (bound %v)",
				mc.Timeout, mc.RetryPolicy != nil, mc.HedgingPolicy != nil, gotPlain, took.Round(time.Millisecond), gotGo, gtook.Round(time.Millisecond), goBound)
		})
	}
}

// a27hStream opens the server stream full on cc, sends its request and
// reads until the stream ends; it returns the error that ended it (nil
// for io.EOF).
func a27hStream(cc grpc.ClientConnInterface, full string) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full)
		if err != nil {
			return err
		}
		if err := st.SendMsg(new(emptypb.Empty)); err != nil && err != io.EOF {
			return err
		}
		if err := st.CloseSend(); err != nil {
			return err
		}
		for {
			if err := st.RecvMsg(new(emptypb.Empty)); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
}

// TestAttack27HStreamsOfARetryingService: the server streams of a service
// whose retry lists UNAVAILABLE and DEADLINE_EXCEEDED. README: streams are
// never retried by the Go client; grpc-go retries a stream that has
// received nothing when its method has a retryPolicy, so the file must
// give none; a stream's bound is its overall_timeout, else its timeout,
// from its opening, for both callers.
func TestAttack27HStreamsOfARetryingService(t *testing.T) {
	files, perr := attackProto(t, "a27h.proto", a27hCombosSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	scJSON := files["a27h/a27h.service_config.json"]
	mcs := parseServiceConfig(t, scJSON)
	sp := a27hResolve(t, "a27h.proto", a27hCombosSrc)[1]
	c, err := runtime.NewClient(&sp.Policy)
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := a27hStart(t)
	plainCC := attack25eDial(t, addr, scJSON)
	goCC := c.Conn(attack25eDial(t, addr, ""))
	for _, tc := range []struct {
		name string
		want time.Duration
	}{{"Watch", 60 * time.Millisecond}, {"WatchLong", 150 * time.Millisecond}} {
		full := "/resilienttest.a27h.Streams/" + tc.name
		mc := mcs["resilienttest.a27h.Streams/"+tc.name]
		if mc.RetryPolicy != nil || mc.HedgingPolicy != nil || a25eParseDur(t, mc.Timeout) != tc.want {
			t.Errorf("%s: methodConfig %+v, want no retry and a timeout of %v", tc.name, mc, tc.want)
		}
		for _, who := range []struct {
			name string
			call func(context.Context) error
		}{{"the caller of the file", a27hStream(plainCC, full)}, {"the Go client", a27hStream(goCC, full)}} {
			srv.reset(func(string, int) a27hReply { return a27hReply{code: codes.Unavailable} })
			if err, _ := a27hTimed(who.call); status.Code(err) != codes.Unavailable || len(srv.arrivals(full)) != 1 {
				t.Errorf("%s, UNAVAILABLE at once: %s got %v after %d requests, want UNAVAILABLE after 1", tc.name, who.name, err, len(srv.arrivals(full)))
			}
			srv.reset(func(string, int) a27hReply { return a27hReply{after: a27hHang} })
			err, took := a27hTimed(who.call)
			if status.Code(err) != codes.DeadlineExceeded || took < tc.want || took > tc.want+250*time.Millisecond || len(srv.arrivals(full)) != 1 {
				t.Errorf("%s, hung: %s got %v after %v and %d requests, want DEADLINE_EXCEEDED after %v and 1", tc.name, who.name, err, took, len(srv.arrivals(full)), tc.want)
			}
		}
	}
}

// a27hBackoffSrc: one attempt of 5 ms, then one retry after a backoff of
// 200 ms (initial = max): the exported timeout is 2 × 5 ms + 200 ms.
const a27hBackoffSrc = `syntax = "proto3";
package resilienttest.a27hb;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a27hb";
service Backoff {
  option (resilient.v1.service) = {retry_budget: {ratio: 1, min_retries: 500}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 5000000}, retry: {max_attempts: 2, initial_backoff: {nanos: 200000000}, max_backoff: {nanos: 200000000}, retryable_codes: ["UNAVAILABLE"]}};
  }
}
`

// TestAttack27HGrpcGoBackoffFitsTheExportedTimeout: grpc-go (v1.85,
// stream.go shouldRetry) does not draw a backoff below its bound as the
// generated client does: it waits the bound times 0.8 to 1.2. README
// (Export: gRPC service config): the exported timeout counts each backoff
// at 1.2 × its bound, so that a caller of the file has the time to make
// the retry the Go client makes: 2 × 5 ms + 240 ms. The server fails the
// first request of each call with UNAVAILABLE at once and answers the
// second. Before, the timeout counted the bound itself (210 ms), and the
// caller of the file got DEADLINE_EXCEEDED in 3 of 8 calls, its retry
// sent too late or not at all.
func TestAttack27HGrpcGoBackoffFitsTheExportedTimeout(t *testing.T) {
	files, perr := attackProto(t, "a27hb.proto", a27hBackoffSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	scJSON := files["a27hb/a27hb.service_config.json"]
	const full = "/resilienttest.a27hb.Backoff/Get"
	mc := parseServiceConfig(t, scJSON)["resilienttest.a27hb.Backoff/Get"]
	exported := a25eParseDur(t, mc.Timeout)
	const backoff = 200 * time.Millisecond
	if mc.RetryPolicy == nil || mc.RetryPolicy.MaxAttempts != 2 || exported != 2*5*time.Millisecond+backoff*6/5 {
		t.Fatalf("want 2 attempts and a timeout of 250ms in:\n%s", scJSON)
	}
	sp := a27hResolve(t, "a27hb.proto", a27hBackoffSrc)[0]
	srv, addr := a27hStart(t)
	plain := a27hPlainUnary(attack25eDial(t, addr, scJSON), full)
	goCall := a27hGoUnary(t, sp, attack25eDial(t, addr, ""), full)
	failFirst := func(_ string, n int) a27hReply {
		if n == 1 {
			return a27hReply{code: codes.Unavailable}
		}
		return a27hReply{}
	}

	var cut, answered int
	var waits []time.Duration
	const calls = 8
	for range calls {
		srv.reset(failFirst)
		err, _ := a27hTimed(plain)
		at := srv.arrivals(full)
		if len(at) == 2 {
			waits = append(waits, at[1].Sub(at[0]))
		}
		switch {
		case err == nil && len(at) == 2:
			answered++
		case status.Code(err) == codes.DeadlineExceeded:
			// Cut in its wait (1 request), or its retry sent too late
			// to answer (2).
			cut++
		default:
			t.Fatalf("the caller of the file: %v after %d requests", err, len(at))
		}
	}
	var goWaits []time.Duration
	goAnswered := 0
	for range 4 {
		srv.reset(failFirst)
		err, _ := a27hTimed(goCall)
		at := srv.arrivals(full)
		if err == nil && len(at) == 2 {
			goAnswered++
			goWaits = append(goWaits, at[1].Sub(at[0]))
		}
	}
	if goAnswered < 3 {
		t.Fatalf("the Go client answered %d of 4 calls with its retry (waits %v): the comparison proves nothing", goAnswered, goWaits)
	}
	for _, w := range goWaits {
		if w > backoff+100*time.Millisecond {
			t.Errorf("the Go client waited %v before its retry, past its max_backoff %v", w, backoff)
		}
	}
	shortest, longest := time.Duration(1<<62), time.Duration(0)
	for _, w := range waits {
		shortest, longest = min(shortest, w), max(longest, w)
	}
	// One call may lose its answer to a loaded machine: the retry comes
	// at most 10 ms before the timeout.
	if cut > 1 {
		t.Errorf("README (Export: gRPC service config): the exported timeout %v counts each backoff at 1.2 × its bound, as grpc-go draws it; "+
			"but in %d of %d calls the caller of the file got DEADLINE_EXCEEDED, its retry not sent or sent too late to answer (waits %v), "+
			"where the Go client retried and answered in %d of 4 calls (waits %v)",
			exported, cut, calls, waits, goAnswered, goWaits)
	}
	if longest > backoff*6/5+50*time.Millisecond {
		t.Errorf("the caller of the file waited up to %v before its retry, past grpc-go's 1.2 × %v", longest, backoff)
	}
	_ = shortest
	t.Logf("the caller of the file: %d answered (waits %v), %d cut; the Go client: waits %v", answered, waits, cut, goWaits)
}

// a27hPushbackSrc: attempts of 100 ms, a backoff of at most 10 ms; no
// overall_timeout, so the exported timeout is 2 × 100 ms + 10 ms.
const a27hPushbackSrc = `syntax = "proto3";
package resilienttest.a27hp;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a27hp";
service Pushed {
  option (resilient.v1.service) = {retry_budget: {ratio: 1, min_retries: 500}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 100000000}, retry: {max_attempts: 2, initial_backoff: {nanos: 10000000}, max_backoff: {nanos: 10000000}, retryable_codes: ["UNAVAILABLE"]}};
  }
}
`

// TestAttack27HPushbackOutlastsTheExportedBound: README (Export: gRPC
// service config): a server's pushback may hold the Go client past the
// exported timeout, which bounds the attempts and backoffs the policy
// makes; a call without an overall_timeout waits a pushback out (README
// Pushback), and the file's timeout cuts that wait for a caller of the
// file. A server that answers UNAVAILABLE with grpc-retry-pushback-ms:
// 400: the Go client waits and answers on its retry, after more than the
// 210 ms (2 × 100 ms + 1.2 × 10 ms) the file says; grpc-go honours the
// same trailer, and its call ends at the file's timeout with
// DEADLINE_EXCEEDED after one request, never sending more than the Go
// client does.
func TestAttack27HPushbackOutlastsTheExportedBound(t *testing.T) {
	files, perr := attackProto(t, "a27hp.proto", a27hPushbackSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	scJSON := files["a27hp/a27hp.service_config.json"]
	const full = "/resilienttest.a27hp.Pushed/Get"
	exported := a25eParseDur(t, parseServiceConfig(t, scJSON)["resilienttest.a27hp.Pushed/Get"].Timeout)
	sp := a27hResolve(t, "a27hp.proto", a27hPushbackSrc)[0]
	goBound := bound.Call(a27hMethod(t, sp, full))
	srv, addr := a27hStart(t)
	plain := a27hPlainUnary(attack25eDial(t, addr, scJSON), full)
	goCall := a27hGoUnary(t, sp, attack25eDial(t, addr, ""), full)
	pushed := func(_ string, n int) a27hReply {
		if n == 1 {
			return a27hReply{code: codes.Unavailable, pushback: "400"}
		}
		return a27hReply{}
	}
	srv.reset(pushed)
	gerr, gtook := a27hTimed(goCall)
	gotGo := len(srv.arrivals(full))
	srv.reset(pushed)
	err, took := a27hTimed(plain)
	gotPlain := len(srv.arrivals(full))
	if gerr != nil || gotGo != 2 || gtook < 400*time.Millisecond {
		t.Fatalf("the Go client: %v after %v and %d requests, want its retry's answer after the 400 ms pushback", gerr, gtook, gotGo)
	}
	if status.Code(err) != codes.DeadlineExceeded || gotPlain != 1 || took < exported || took > exported+250*time.Millisecond {
		t.Errorf("README (Export: gRPC service config): a pushback past the exported timeout %v (the Go client's bound %v) cuts a caller of the file's wait "+
			"there; the Go client answered in %v (%d requests), the caller of the file got %v after %v (%d requests), want DEADLINE_EXCEEDED at the timeout after 1",
			exported, goBound, gtook.Round(time.Millisecond), gotGo, err, took.Round(time.Millisecond), gotPlain)
	}
}

// a27hBudgetsSrc: two services of one file, each retrying UNAVAILABLE 3
// times, with different budgets: Loose's floor of 50 retries, Strict's of
// 2. gRPC throttles per channel, so the file has the stricter of each
// value (README: "the strictest of each value").
const a27hBudgetsSrc = `syntax = "proto3";
package resilienttest.a27hbud;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a27hbud";
service Loose {
  option (resilient.v1.service) = {retry_budget: {ratio: 0.5, min_retries: 50, window: {seconds: 3600}}, retry: {initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 1000000}}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) { option idempotency_level = NO_SIDE_EFFECTS; }
}
service Strict {
  option (resilient.v1.service) = {retry_budget: {ratio: 0.01, min_retries: 2, window: {seconds: 3600}}, retry: {initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 1000000}}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) { option idempotency_level = NO_SIDE_EFFECTS; }
}
`

// TestAttack27HThrottlingAcrossServicesNeverLooser: both services of the
// file on one channel that loaded its service config, against a server
// that fails every request with UNAVAILABLE, interleaved with successes;
// each service's generated client has a budget of its own. Whatever the
// order, the caller of the file sends no more requests of a service than
// that service's Go client (one client per service, as generated): the
// channel's one token bucket is the stricter of the two budgets, and
// failures of one service only take retries from the other.
func TestAttack27HThrottlingAcrossServicesNeverLooser(t *testing.T) {
	files, perr := attackProto(t, "a27hbud.proto", a27hBudgetsSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	scJSON := files["a27hbud/a27hbud.service_config.json"]
	if !strings.Contains(scJSON, `"maxTokens": 4,`) || !strings.Contains(scJSON, `"tokenRatio": 0.01`) {
		t.Fatalf("want the stricter of each value (maxTokens 4 = 2 × 2, tokenRatio 0.01) in:\n%s", scJSON)
	}
	sps := a27hResolve(t, "a27hbud.proto", a27hBudgetsSrc)
	const loose, strict = "/resilienttest.a27hbud.Loose/Get", "/resilienttest.a27hbud.Strict/Get"
	for _, order := range []string{"LLLLSSSS", "SSSSLLLL", "LSLSLSLS", "LLoLLoSSoSS", "oooooLLLL"} {
		srv, addr := a27hStart(t)
		fail := func(string, int) a27hReply { return a27hReply{code: codes.Unavailable} }
		ok := func(string, int) a27hReply { return a27hReply{} }
		run := func(call func(method string) func(context.Context) error) (l, s int) {
			for _, c := range order {
				method := map[rune]string{'L': loose, 'S': strict, 'o': loose}[c]
				srv.reset(fail)
				if c == 'o' {
					srv.reset(ok)
				}
				err, _ := a27hTimed(call(method))
				if (c == 'o') != (err == nil) {
					t.Fatalf("%s: %s: %v", order, method, err)
				}
				n := len(srv.arrivals(method))
				if c == 'S' {
					s += n
				} else if c == 'L' {
					l += n
				}
			}
			return l, s
		}
		plainCC := attack25eDial(t, addr, scJSON)
		pl, ps := run(func(m string) func(context.Context) error { return a27hPlainUnary(plainCC, m) })
		goCC := attack25eDial(t, addr, "")
		clients := map[string]*runtime.Client{}
		for i, m := range []string{loose, strict} {
			c, err := runtime.NewClient(&sps[i].Policy)
			if err != nil {
				t.Fatal(err)
			}
			clients[m] = c
		}
		gl, gs := run(func(m string) func(context.Context) error {
			h, err := runtime.NewUnary(clients[m], m, func(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*emptypb.Empty, error) {
				out := new(emptypb.Empty)
				return out, goCC.Invoke(ctx, m, in, out, opts...)
			}, runtime.UnaryHooks[emptypb.Empty, emptypb.Empty]{})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error { _, err := h.Call(ctx, new(emptypb.Empty)); return err }
		})
		if pl > gl || ps > gs {
			t.Errorf("%s: the caller of the file sent Loose %d and Strict %d failing requests, the Go clients %d and %d: the file is looser than a budget",
				order, pl, ps, gl, gs)
		}
		t.Logf("%s: file Loose %d Strict %d; Go Loose %d Strict %d", order, pl, ps, gl, gs)
	}
}
