// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// attack25eShapesProto has every RPC shape, a cache keyed by two strings
// and an optional integer, a string, an integer and a generated
// idempotency key.
const attack25eShapesProto = `syntax = "proto3";
package shapes.v1;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/shapes/v1;shapesv1";

service Shapes {
  option (resilient.v1.service) = {timeout: {seconds: 5}};
  rpc Get(GetRequest) returns (Item) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {
      retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 2000000}}
      cache: {fresh_ttl: {seconds: 60}, key_fields: ["sku", "shelf", "day"]}
    };
  }
  rpc Reserve(ReserveRequest) returns (Item) {
    option (resilient.v1.method) = {idempotency_key: "order_id", retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}}};
  }
  rpc ReserveNumbered(NumberedRequest) returns (Item) {
    option (resilient.v1.method) = {idempotency_key: "n", retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}}};
  }
  rpc Pay(PayRequest) returns (Item) {
    option (resilient.v1.method) = {generate_idempotency_key: true, retry: {max_attempts: 3, initial_backoff: {nanos: 1000000}}};
  }
  rpc Watch(GetRequest) returns (stream Item);
  rpc Upload(stream Item) returns (Item);
  rpc Chat(stream Item) returns (stream Item);
}

message GetRequest {
  string sku = 1;
  string shelf = 2;
  optional int64 day = 3;
}
message ReserveRequest { string order_id = 1; }
message NumberedRequest { int64 n = 1; }
message PayRequest { int64 cents = 1; }
message Item { string id = 1; int64 n = 2; }
`

// attack25eShapesCall is a test of the scratch module: a real gRPC server
// on loopback, the generated resilient client, each shape called. The
// server fails the attempts the test asks it to with UNAVAILABLE, before
// any message, and records each attempt's idempotency-key header.
const attack25eShapesCall = `package shapesv1

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type server struct {
	UnimplementedShapesServer
	mu   sync.Mutex
	fail map[string]int      // method → attempts still to fail
	keys map[string][]string // method → the idempotency-key of each attempt ("-" for none)
}

// attempt records an attempt of method and reports whether it must fail.
func (s *server) attempt(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	key := "-"
	if v := md.Get("idempotency-key"); len(v) > 0 {
		key = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[method] = append(s.keys[method], key)
	if s.fail[method] > 0 {
		s.fail[method]--
		return status.Error(codes.Unavailable, "failing as asked")
	}
	return nil
}

func (s *server) next(method string, fail int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method], s.keys[method] = fail, nil
}

func (s *server) seen(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[method]...)
}

func (s *server) Get(ctx context.Context, in *GetRequest) (*Item, error) {
	if err := s.attempt(ctx, "Get"); err != nil {
		return nil, err
	}
	return &Item{Id: in.GetSku() + "/" + in.GetShelf()}, nil
}

func (s *server) Reserve(ctx context.Context, in *ReserveRequest) (*Item, error) {
	if err := s.attempt(ctx, "Reserve"); err != nil {
		return nil, err
	}
	return &Item{Id: in.GetOrderId()}, nil
}

func (s *server) ReserveNumbered(ctx context.Context, in *NumberedRequest) (*Item, error) {
	if err := s.attempt(ctx, "ReserveNumbered"); err != nil {
		return nil, err
	}
	return &Item{N: in.GetN()}, nil
}

func (s *server) Pay(ctx context.Context, in *PayRequest) (*Item, error) {
	if err := s.attempt(ctx, "Pay"); err != nil {
		return nil, err
	}
	return &Item{N: in.GetCents()}, nil
}

func (s *server) Watch(in *GetRequest, stream grpc.ServerStreamingServer[Item]) error {
	if err := s.attempt(stream.Context(), "Watch"); err != nil {
		return err
	}
	for i := range 3 {
		if err := stream.Send(&Item{Id: in.GetSku(), N: int64(i)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) Upload(stream grpc.ClientStreamingServer[Item, Item]) error {
	if err := s.attempt(stream.Context(), "Upload"); err != nil {
		return err
	}
	var n int64
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&Item{N: n})
		}
		if err != nil {
			return err
		}
		n += m.GetN()
	}
}

func (s *server) Chat(stream grpc.BidiStreamingServer[Item, Item]) error {
	if err := s.attempt(stream.Context(), "Chat"); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&Item{Id: "echo " + m.GetId(), N: m.GetN()}); err != nil {
			return err
		}
	}
}

func TestShapesCalled(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{fail: map[string]int{}, keys: map[string][]string{}}
	gs := grpc.NewServer()
	RegisterShapesServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := NewShapesResilientClient(cc, ShapesResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var _ ShapesClient = c
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Unary, cached: a retried miss, then hits for the same key, misses
	// for keys that a naive join or a lost presence would confuse.
	s.next("Get", 1)
	got, err := c.Get(ctx, &GetRequest{Sku: "a", Shelf: "bc"})
	if err != nil || got.GetId() != "a/bc" || len(s.seen("Get")) != 2 {
		t.Errorf("Get a/bc: %v, %v after %d attempts; want a/bc after 2 (one retry of UNAVAILABLE)", got, err, len(s.seen("Get")))
	}
	s.next("Get", 0)
	got, err = c.Get(ctx, &GetRequest{Sku: "a", Shelf: "bc"})
	if err != nil || got.GetId() != "a/bc" || len(s.seen("Get")) != 0 {
		t.Errorf("Get a/bc again: %v, %v after %d attempts; want the cached answer, nothing sent", got, err, len(s.seen("Get")))
	}
	for _, in := range []*GetRequest{{Sku: "ab", Shelf: "c"}, {Sku: "a", Shelf: "bc", Day: proto.Int64(0)}, {Sku: "a", Shelf: "bc", Day: proto.Int64(3)}} {
		s.next("Get", 0)
		if _, err := c.Get(ctx, in); err != nil || len(s.seen("Get")) != 1 {
			t.Errorf("Get %v: %v after %d attempts; want a miss of its own, 1 attempt", in, err, len(s.seen("Get")))
		}
	}

	// Unary, keyed by a string, by an integer, by a generated key: every
	// attempt carries the same key; no key value is sent once, with no header.
	for _, tc := range []struct {
		method string
		call   func() error
		key    string // "" for a generated one
	}{
		{"Reserve", func() error { _, err := c.Reserve(ctx, &ReserveRequest{OrderId: "o-1"}); return err }, "o-1"},
		{"ReserveNumbered", func() error { _, err := c.ReserveNumbered(ctx, &NumberedRequest{N: 42}); return err }, "42"},
		{"Pay", func() error { _, err := c.Pay(ctx, &PayRequest{Cents: 5}); return err }, ""},
	} {
		s.next(tc.method, 2)
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v, want success on the third attempt", tc.method, err)
		}
		keys := s.seen(tc.method)
		if len(keys) != 3 || keys[0] == "-" || keys[0] != keys[1] || keys[1] != keys[2] || (tc.key != "" && keys[0] != tc.key) {
			t.Errorf("%s: attempts keyed %q, want 3 attempts with one key %q", tc.method, keys, tc.key)
		}
	}
	paid := s.seen("Pay")
	s.next("Pay", 0)
	if _, err := c.Pay(ctx, &PayRequest{Cents: 5}); err != nil {
		t.Errorf("Pay again: %v", err)
	}
	if again := s.seen("Pay"); len(again) != 1 || again[0] == "-" || again[0] == paid[0] {
		t.Errorf("Pay again: attempts keyed %q, want one with a key of its own (the first call's was %q)", again, paid[0])
	}
	for _, tc := range []struct {
		method string
		call   func() error
	}{
		{"Reserve", func() error { _, err := c.Reserve(ctx, &ReserveRequest{}); return err }},
		{"ReserveNumbered", func() error { _, err := c.ReserveNumbered(ctx, &NumberedRequest{}); return err }},
	} {
		s.next(tc.method, 2)
		err := tc.call()
		if keys := s.seen(tc.method); status.Code(err) != codes.Unavailable || len(keys) != 1 || keys[0] != "-" {
			t.Errorf("%s without a key value: %v, attempts keyed %q; want UNAVAILABLE after one attempt without the header", tc.method, err, keys)
		}
	}

	// Server stream: refused at its opening, not retried; then 3 messages.
	s.next("Watch", 1)
	ws, err := c.Watch(ctx, &GetRequest{Sku: "w"})
	if err == nil {
		_, err = ws.Recv()
	}
	if status.Code(err) != codes.Unavailable || len(s.seen("Watch")) != 1 {
		t.Errorf("Watch refused: %v after %d attempts; want UNAVAILABLE after 1 (streams are not retried)", err, len(s.seen("Watch")))
	}
	ws, err = c.Watch(ctx, &GetRequest{Sku: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		m, err := ws.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || m.GetId() != "w" || m.GetN() != int64(n) {
			t.Fatalf("Watch message %d: %v, %v", n, m, err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("Watch: %d messages, want 3", n)
	}

	// Client stream: refused, not retried; then 1+2+3 summed.
	s.next("Upload", 1)
	us, err := c.Upload(ctx)
	if err == nil {
		_ = us.Send(&Item{N: 1})
		_, err = us.CloseAndRecv()
	}
	if status.Code(err) != codes.Unavailable || len(s.seen("Upload")) != 1 {
		t.Errorf("Upload refused: %v after %d attempts; want UNAVAILABLE after 1", err, len(s.seen("Upload")))
	}
	us, err = c.Upload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ {
		if err := us.Send(&Item{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := us.CloseAndRecv(); err != nil || sum.GetN() != 6 {
		t.Errorf("Upload: %v, %v; want 6", sum, err)
	}

	// Bidirectional stream: refused, not retried; then an echo of each.
	s.next("Chat", 1)
	bs, err := c.Chat(ctx)
	if err == nil {
		_ = bs.Send(&Item{Id: "x"})
		_, err = bs.Recv()
	}
	if status.Code(err) != codes.Unavailable || len(s.seen("Chat")) != 1 {
		t.Errorf("Chat refused: %v after %d attempts; want UNAVAILABLE after 1", err, len(s.seen("Chat")))
	}
	bs, err = c.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := bs.Send(&Item{Id: "m", N: int64(i)}); err != nil {
			t.Fatal(err)
		}
		m, err := bs.Recv()
		if err != nil || m.GetId() != "echo m" || m.GetN() != int64(i) {
			t.Fatalf("Chat echo %d: %v, %v", i, m, err)
		}
	}
	if err := bs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Chat after CloseSend: %v, want EOF", err)
	}
}
`

// TestAttack25eShapesCalled builds the generated client of every RPC shape
// in a scratch module (attack24lBuild: build and vet) and runs a test in
// it that calls each shape, through the generated resilient client, on a
// real loopback gRPC server: a cached read retried once and then served
// from its cache (keys that a naive join, or a lost optional's presence,
// would confuse are misses of their own); a string, integer and generated
// idempotency key identical on each of three attempts; no key value sent
// once without the header; a server, client and bidirectional stream
// refused at its opening not retried, then carrying its messages.
func TestAttack25eShapesCalled(t *testing.T) {
	out, _ := attack24lBuild(t, "module="+testModule, map[string]string{"shapes/v1/shapes.proto": attack25eShapesProto}, "shapes/v1/shapes.proto")
	if t.Failed() {
		return
	}
	writeFile(t, filepath.Join(out, "shapes", "v1", "shapes_call_test.go"), []byte(attack25eShapesCall))
	cmd := exec.Command("go", "test", "-count=1", "./shapes/v1/")
	cmd.Dir = out
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the generated shapes, called: %v\n%s", err, b)
	}
}
