// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// runPluginParams runs the generator in-process with the plugin's own
// parameters, as main does.
func runPluginParams(t testing.TB, req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	var flags flag.FlagSet
	o := newExportOptions(&flags)
	gen, err := protogen.Options{ParamFunc: paramFunc(&flags)}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := generateWith(gen, o); err != nil {
		gen.Error(err)
	}
	return gen.Response()
}

// exportFiles generates the exports of testdata/export/<name>.proto with the
// given parameters and returns the files by name.
func exportFiles(t testing.TB, name, params string) map[string]string {
	t.Helper()
	return testdataFiles(t, "export/"+name+".proto", params)
}

// testdataFiles generates the files of testdata/<path> with the given
// parameters and returns them by name.
func testdataFiles(t testing.TB, path, params string) map[string]string {
	t.Helper()
	req := compileRequest(t, "module="+testModule+","+params, []string{"testdata", "../../options"}, path)
	resp := runPluginParams(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	out := map[string]string{}
	for _, f := range resp.File {
		out[f.GetName()] = f.GetContent()
	}
	return out
}

// checkGolden compares got with testdata/golden/<name>.golden, or rewrites
// it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run go test -update to rewrite it); got:\n%s", name, golden, got)
	}
}

func TestExportGolden(t *testing.T) {
	for _, tc := range []struct {
		proto, params, file, golden string
	}{
		{"export", "service_config=true", "export/export.service_config.json", "export.service_config.json"},
		{"export", "envoy=true", "export/export.envoy.yaml", "export.envoy.yaml"},
		{"export", "envoy=true,envoy_retries=client", "export/export.envoy.yaml", "export.envoy_client.yaml"},
		{"export", "docs", "export/export.policy.md", "export.policy.md"},
		{"throttle", "service_config=true", "throttle/throttle.service_config.json", "throttle.service_config.json"},
		{"gen/adaptive", "envoy=true", "adaptive/adaptive.envoy.yaml", "adaptive.envoy.yaml"},
		{"gen/adaptive", "docs", "adaptive/adaptive.policy.md", "adaptive.policy.md"},
		// The server side and the rate limit on the page, from the
		// generated code's own test files.
		{"gen/server", "docs", "server/server.policy.md", "server.policy.md"},
		{"gen/rate_limit", "docs", "rate_limit/rate_limit.policy.md", "rate_limit.policy.md"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			src, name, ok := strings.Cut(tc.proto, "/")
			if !ok {
				src, name = "export", tc.proto
			}
			files := testdataFiles(t, src+"/"+name+".proto", tc.params)
			got, ok := files[tc.file]
			if !ok {
				t.Fatalf("%s not written; got %v", tc.file, keys(files))
			}
			if _, ok := files[name+"/"+name+"_resilient.pb.go"]; !ok || len(files) != 2 {
				t.Errorf("wrote %v, want the Go client and %s", keys(files), tc.file)
			}
			checkGolden(t, tc.golden, got)
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestExportsOnlyWhenAsked checks that without parameters the plugin writes
// the Go client only, and that a refused policy writes no export either.
func TestExportsOnlyWhenAsked(t *testing.T) {
	if files := exportFiles(t, "export", "paths=import"); len(files) != 1 {
		t.Errorf("without export parameters the plugin wrote %v", keys(files))
	}
	req := compileRequest(t, "module="+testModule+",service_config=true,envoy=true,docs=true", []string{"testdata", "../../options"}, "refuse/breaker_without_per_method.proto")
	resp := runPluginParams(t, req)
	if resp.Error == nil || len(resp.File) != 0 {
		t.Errorf("a refused policy gave error %q and files %d; want an error and no file", resp.GetError(), len(resp.File))
	}
}

func TestExportParams(t *testing.T) {
	for _, tc := range []struct{ params, want string }{
		{"bogus=1", `unknown parameter "bogus": the plugin takes docs=…, envoy=…, envoy_retries=…, service_config=…, besides protogen's paths=, module=, annotate_code and M…`},
		{"envoy_retries=both", `parameter envoy_retries=both: must be envoy (Envoy retries, the callers do not) or client (the callers retry, the routes get no retry_policy), got "both"`},
		{"docs=yes", `parameter docs=yes: must be true or false`},
	} {
		req := testRequest(t, "export/export.proto")
		req.Parameter = new(*req.Parameter + "," + tc.params)
		var flags flag.FlagSet
		newExportOptions(&flags)
		_, err := protogen.Options{ParamFunc: paramFunc(&flags)}.New(req)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got error\n%v\nwant\n%s", tc.params, err, tc.want)
		}
	}
}

// TestExampleExportsInSync checks the exports checked in beside the
// example's generated code (buf.gen.yaml asks for all three).
func TestExampleExportsInSync(t *testing.T) {
	for _, name := range []string{"inventory", "payments"} {
		file := "example/" + name + "/v1/" + name + ".proto"
		req := compileRequest(t, "module=github.com/go-resilient/resilient,service_config=true,envoy=true,docs=true", []string{"../../example/proto", "../../options"}, file)
		resp := runPluginParams(t, req)
		if resp.Error != nil {
			t.Fatalf("plugin error:\n%s", resp.GetError())
		}
		if len(resp.File) != 4 {
			t.Fatalf("%s: generated %d files, want 4", file, len(resp.File))
		}
		for _, f := range resp.File {
			path := filepath.Join("..", "..", filepath.FromSlash(f.GetName()))
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.GetContent() != string(want) {
				t.Errorf("%s is out of date: run go tool -modfile=tools/go.mod buf generate", path)
			}
		}
	}
}

// countingServer is a loopback gRPC server that answers every method with
// the code it is told to, after the delay it is told, and records per
// method the calls it receives and the idempotency-key header of each.
type countingServer struct {
	mu    sync.Mutex
	code  codes.Code
	delay time.Duration
	calls map[string]int
	keys  map[string][]string // method → the header of each request ("" for none)
}

func (s *countingServer) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	key := ""
	if md, _ := metadata.FromIncomingContext(stream.Context()); len(md.Get("idempotency-key")) > 0 {
		key = md.Get("idempotency-key")[0]
	}
	s.mu.Lock()
	s.calls[method]++
	s.keys[method] = append(s.keys[method], key)
	code, delay := s.code, s.delay
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	if code != codes.OK {
		return status.Error(code, "as the test asked")
	}
	return stream.SendMsg(new(emptypb.Empty))
}

func (s *countingServer) set(code codes.Code, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code, s.delay, s.calls, s.keys = code, delay, map[string]int{}, map[string][]string{}
}

// seen returns the idempotency-key header of each request of method, in
// order ("" for a request without one).
func (s *countingServer) seen(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[method]...)
}

func (s *countingServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func startCountingServer(t *testing.T) (*countingServer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingServer{calls: map[string]int{}, keys: map[string][]string{}}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(cs.handle))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return cs, lis.Addr().String()
}

// dialWithServiceConfig dials a plain grpc-go channel whose only policy is
// the exported service config; each call gets a channel of its own, so
// that the retry throttling of one does not spill into the next.
func dialWithServiceConfig(t *testing.T, addr, sc string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestServiceConfigRoundTrip loads the exported JSON into a plain grpc-go
// client and checks, on a real loopback server, that gRPC's own retries
// and timeouts behave as annotated.
func TestServiceConfigRoundTrip(t *testing.T) {
	sc := exportFiles(t, "export", "service_config=true")["export/export.service_config.json"]
	srv, addr := startCountingServer(t)
	const svc = "/resilienttest.export.Orders/"
	for _, tc := range []struct {
		name   string
		method string
		code   codes.Code
		calls  int
	}{
		{"retryable code: every attempt", "Get", codes.Unavailable, 3},
		{"answer: one attempt", "Get", codes.NotFound, 1},
		{"success: one attempt", "Get", codes.OK, 1},
		{"8 attempts annotated: gRPC's cap of 5", "Scan", codes.Unavailable, 5},
		{"another listed code", "Scan", codes.Aborted, 5},
		{"code not listed", "Scan", codes.Internal, 1},
		{"not idempotent: one attempt", "Create", codes.Unavailable, 1},
		// The generated client retries these with their key; a plain
		// client that loads the config sends no key, so gets no retry.
		{"keyed by a field, not idempotent: one attempt", "Reserve", codes.Unavailable, 1},
		{"keyed by a generated key, not idempotent: one attempt", "Pay", codes.Unavailable, 1},
		{"no annotation: one attempt", "/resilienttest.export.Plain/Ping", codes.Unavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.set(tc.code, 0)
			method := tc.method
			if !strings.HasPrefix(method, "/") {
				method = svc + method
			}
			cc := dialWithServiceConfig(t, addr, sc)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := cc.Invoke(ctx, method, new(emptypb.Empty), new(emptypb.Empty))
			if got := status.Code(err); got != tc.code {
				t.Errorf("the call ended with %v (%v), want %v", got, err, tc.code)
			}
			if got := srv.count(method); got != tc.calls {
				t.Errorf("the server received %d calls, want %d", got, tc.calls)
			}
		})
	}

	t.Run("timeout: the annotated bound of the call", func(t *testing.T) {
		// Get: 3 attempts of 200 ms and backoffs of 1 and 2 ms: 603 ms.
		// gRPC has no per-attempt timeout, so the call gets the bound.
		srv.set(codes.OK, 5*time.Second)
		cc := dialWithServiceConfig(t, addr, sc)
		start := time.Now()
		err := cc.Invoke(context.Background(), svc+"Get", new(emptypb.Empty), new(emptypb.Empty))
		took := time.Since(start)
		if status.Code(err) != codes.DeadlineExceeded || took < 600*time.Millisecond || took > 3*time.Second {
			t.Errorf("a hanging server gave %v after %v; want DEADLINE_EXCEEDED after about 603ms", err, took)
		}
	})

	t.Run("retry throttling from the retry budget", func(t *testing.T) {
		// min_retries 2 gives maxTokens 4: gRPC stops retrying once the
		// tokens fall to 2, that is after two failed attempts.
		sc := exportFiles(t, "throttle", "service_config=true")["throttle/throttle.service_config.json"]
		srv.set(codes.Unavailable, 0)
		cc := dialWithServiceConfig(t, addr, sc)
		const method, calls = "/resilienttest.throttle.Throttled/Get", 5
		for range calls {
			if err := cc.Invoke(context.Background(), method, new(emptypb.Empty), new(emptypb.Empty)); status.Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want UNAVAILABLE", err)
			}
		}
		// Without throttling: 5 calls × 3 attempts = 15.
		if got, want := srv.count(method), calls+1; got != want {
			t.Errorf("the server received %d calls for %d failing requests, want %d (one retry, then throttled)", got, calls, want)
		}
	})
}

// TestServiceConfigIsValidJSON checks the shape grpc-go requires of the
// parts it silently ignores when wrong.
func TestServiceConfigIsValidJSON(t *testing.T) {
	var sc struct {
		MethodConfig []struct {
			RetryPolicy *struct{ MaxAttempts int }
		}
		RetryThrottling struct {
			MaxTokens  float64
			TokenRatio float64
		}
	}
	raw := exportFiles(t, "export", "service_config=true")["export/export.service_config.json"]
	if err := json.Unmarshal([]byte(raw), &sc); err != nil {
		t.Fatal(err)
	}
	for _, mc := range sc.MethodConfig {
		if rp := mc.RetryPolicy; rp != nil && (rp.MaxAttempts < 2 || rp.MaxAttempts > grpcMaxAttempts) {
			t.Errorf("maxAttempts %d outside [2, %d]", rp.MaxAttempts, grpcMaxAttempts)
		}
	}
	if rt := sc.RetryThrottling; rt.MaxTokens <= 0 || rt.MaxTokens > grpcMaxTokens || rt.TokenRatio <= 0 {
		t.Errorf("retryThrottling %+v outside gRPC's ranges", rt)
	}
}

func TestCallBound(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		mp   policy.Method
		want time.Duration
	}{
		{policy.Method{}, 0},
		{policy.Method{Timeout: 300 * ms}, 300 * ms},
		// One attempt: its own timeout cuts it before the overall one.
		{policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second}, 300 * ms},
		{policy.Method{Kind: policy.KindServerStreaming, Timeout: 300 * ms, OverallTimeout: time.Second}, time.Second},
		{policy.Method{Timeout: 300 * ms, Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * ms, MaxBackoff: 200 * ms, Multiplier: 2}}, 900*ms + 50*ms + 100*ms},
		{policy.Method{Timeout: 100 * ms, Retry: &policy.Retry{MaxAttempts: 4, InitialBackoff: 50 * ms, MaxBackoff: 80 * ms, Multiplier: 2}}, 400*ms + 50*ms + 80*ms + 80*ms},
		{policy.Method{Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * ms, MaxBackoff: 200 * ms, Multiplier: 2}}, 0},
	} {
		if got := bound.Call(&tc.mp); got != tc.want {
			t.Errorf("bound.Call(%+v) = %v, want %v", tc.mp, got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0s",
		2 * time.Second:         "2s",
		300 * time.Millisecond:  "0.300s",
		1500 * time.Microsecond: "0.001500s",
		time.Second + 1:         "1.000000001s",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestExportsRepeatKeyedOnlyWithKey checks the rule every export follows
// for a method that is safe to repeat only with its idempotency key: the
// service config neither retries nor hedges it, and bounds it as one
// attempt; Envoy retries it only on a route that requires the header.
func TestExportsRepeatKeyedOnlyWithKey(t *testing.T) {
	ms := time.Millisecond
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: 50 * ms, MaxBackoff: 200 * ms, Multiplier: 2}
	hedge := &policy.Hedging{Delay: 20 * ms, MaxCopies: 2}
	for _, tc := range []struct {
		name string
		mp   policy.Method
		want bool
	}{
		{"idempotent, retried", policy.Method{Idempotent: true, Retry: retry}, true},
		{"idempotent, hedged", policy.Method{Idempotent: true, Hedging: hedge}, true},
		{"not idempotent, not repeated", policy.Method{Timeout: 100 * ms}, true},
		{"keyed, retried", policy.Method{IdempotencyKey: "order_id", Retry: retry}, false},
		{"generated key, retried", policy.Method{GenerateIdempotencyKey: true, Retry: retry}, false},
		// The plugin refuses this one (hedging needs an idempotent method);
		// the exports would still not hedge it.
		{"keyed, hedged", policy.Method{IdempotencyKey: "order_id", Hedging: hedge}, false},
	} {
		if got := repeatableWithoutKey(&tc.mp); got != tc.want {
			t.Errorf("%s: repeatableWithoutKey = %v, want %v", tc.name, got, tc.want)
		}
	}
	mp := &policy.Method{IdempotencyKey: "order_id", Timeout: 100 * ms, Retry: retry, Hedging: hedge}
	one := oneAttempt(mp)
	if one.Retry != nil || one.Hedging != nil || mp.Retry == nil || mp.Hedging == nil {
		t.Errorf("oneAttempt gave retry %v hedging %v and left the original with %v, %v", one.Retry, one.Hedging, mp.Retry, mp.Hedging)
	}
	if got := bound.Call(one); got != 100*ms {
		t.Errorf("the bound of one attempt is %v, want the attempt's timeout 100ms", got)
	}

	sc := exportFiles(t, "export", "service_config=true")["export/export.service_config.json"]
	var parsed struct {
		MethodConfig []struct {
			Name          []struct{ Service, Method string }
			Timeout       string
			RetryPolicy   json.RawMessage
			HedgingPolicy json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(sc), &parsed); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, mc := range parsed.MethodConfig {
		m := mc.Name[0].Method
		if (m == "Reserve" || m == "Pay") && (mc.RetryPolicy != nil || mc.HedgingPolicy != nil) {
			t.Errorf("%s, keyed and not idempotent, has retryPolicy %s hedgingPolicy %s", m, mc.RetryPolicy, mc.HedgingPolicy)
		}
		seen[m] = mc.Timeout
	}
	// Reserve: one attempt of 200 ms, not 3 with backoffs; Pay: one
	// attempt of 200 ms too, not its overall_timeout of 1 s, which only
	// its retries could fill.
	if seen["Reserve"] != "0.200s" || seen["Pay"] != "0.200s" {
		t.Errorf("timeouts Reserve %q, Pay %q; want 0.200s and 0.200s", seen["Reserve"], seen["Pay"])
	}

	envoy := exportFiles(t, "export", "envoy=true")["export/export.envoy.yaml"]
	for _, m := range []string{"Reserve", "Pay"} {
		keyed := "- name: resilienttest.export.Orders/" + m + " with idempotency-key\n"
		plain := "- name: resilienttest.export.Orders/" + m + "\n"
		i, j := strings.Index(envoy, keyed), strings.Index(envoy, plain)
		if i < 0 || j < i {
			t.Fatalf("%s: want a route with the header, then one without, in:\n%s", m, envoy)
		}
		withKey, without := envoy[i:j], envoy[j:]
		without = without[:strings.Index(without[2:], "- name:")+2]
		if !strings.Contains(withKey, `string_match: {safe_regex: {regex: ".+"}}`) || !strings.Contains(withKey, "retry_policy:") {
			t.Errorf("%s: the keyed route lacks the header match or the retries:\n%s", m, withKey)
		}
		if strings.Contains(without, "retry_policy") || strings.Contains(without, "headers:") {
			t.Errorf("%s: the route without the key retries or matches a header:\n%s", m, without)
		}
	}
	client := exportFiles(t, "export", "envoy=true,envoy_retries=client")["export/export.envoy.yaml"]
	var values []string // the YAML without its comments
	for _, line := range strings.Split(client, "\n") {
		values = append(values, strings.SplitN(line, "#", 2)[0])
	}
	if v := strings.Join(values, "\n"); strings.Contains(v, "retry_policy") || strings.Contains(v, "headers:") {
		t.Errorf("with envoy_retries=client a route retries or is split by the key:\n%s", client)
	}
}

// TestHedgingKeyedRefused checks that a method that is not idempotent
// cannot be hedged at all, key or not: what the exports would otherwise
// have to split.
func TestHedgingKeyedRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hedge_keyed.proto"), []byte(`syntax = "proto3";
package resilienttest.hedgekeyed;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/hedgekeyed";
message Req { string id = 1; }
message Resp {}
service S {
  rpc Reserve(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotency_key: "id", hedging: {delay: {nanos: 20000000}}};
  }
}
`))
	req := compileRequest(t, "module="+testModule+",service_config=true,envoy=true", []string{dir, "../../options"}, "hedge_keyed.proto")
	resp := runPluginParams(t, req)
	if !strings.Contains(resp.GetError(), "hedge_keyed.proto:9:5: resilienttest.hedgekeyed.S.Reserve: (resilient.v1.method).hedging: Reserve is not idempotent") || len(resp.File) != 0 {
		t.Errorf("keyed hedging gave error %q and %d files; want it refused at the method", resp.GetError(), len(resp.File))
	}
}

// TestIdempotencyKeyHeader checks that the exports name the header the
// runtime sends.
func TestIdempotencyKeyHeader(t *testing.T) {
	if idempotencyKeyHeader != runtime.IdempotencyKeyHeader {
		t.Errorf("the exports match %q, the runtime sends %q", idempotencyKeyHeader, runtime.IdempotencyKeyHeader)
	}
}

// TestThrottlingTokensDoNotWrap: maxTokens is 2 × min_retries within
// [1, 1000] for every MinRetries a policy.Budget can hold, the largest int
// (whose double wraps) among them.
func TestThrottlingTokensDoNotWrap(t *testing.T) {
	for _, tc := range []struct{ minRetries, want int }{
		{-1, 1}, {0, 1}, {1, 2}, {10, 20}, {500, 1000}, {501, 1000},
		{math.MaxUint32, 1000}, {math.MaxInt / 2, 1000}, {math.MaxInt/2 + 1, 1000}, {math.MaxInt, 1000},
	} {
		if got := throttlingOf(&policy.Budget{Ratio: 0.1, MinRetries: tc.minRetries}).MaxTokens; got != tc.want {
			t.Errorf("min_retries %d: maxTokens %d, want %d", tc.minRetries, got, tc.want)
		}
	}
}
