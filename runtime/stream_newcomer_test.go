// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestNewcomerNilMessageOnAClientStream: the README ("Construct and
// call", "Errors") says the handles refuse a nil request, INVALID_ARGUMENT
// with nothing sent, because gRPC would send an empty message, "which is
// never what the caller meant". A client or bidirectional stream takes its
// requests through Send, and Send(nil) on the stream a resilient handle
// opened went to grpc-go as it is: the server received an empty message
// and the caller no error. Now SendMsg refuses nil and a typed nil, with
// INVALID_ARGUMENT naming the method, and the stream goes on: a server
// counting what it received on loopback sees only the real messages, the
// stream keeps its bulkhead permit until it ends, and its outcome is
// counted once, a success.
func TestNewcomerNilMessageOnAClientStream(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	var got []string // the sku of each message the server received
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		for {
			var in inventoryv1.WatchStockRequest
			if err := st.RecvMsg(&in); err == io.EOF {
				return st.SendMsg(&inventoryv1.WatchStockResponse{})
			} else if err != nil {
				return err
			}
			mu.Lock()
			got = append(got, in.GetSku())
			mu.Unlock()
		}
	}))
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	defer func() { gs.Stop(); <-done }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	for _, kind := range []struct {
		name string
		kind policy.Kind
		desc grpc.StreamDesc
	}{
		{"client stream", policy.KindClientStreaming, grpc.StreamDesc{StreamName: "Upload", ClientStreams: true}},
		{"bidi stream", policy.KindBidiStreaming, grpc.StreamDesc{StreamName: "Chat", ClientStreams: true, ServerStreams: true}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			method := "/example.inventory.v1.InventoryService/" + kind.desc.StreamName
			p := policy.Service{Name: "example.inventory.v1.InventoryService",
				Breaker:  breakerPolicy(1, 1),
				Bulkhead: &policy.Bulkhead{Permits: 1},
				Methods:  []policy.Method{{Name: method, Kind: kind.kind}}}
			reg := prometheus.NewRegistry()
			rt, err := runtime.NewClient(&p, runtime.WithRegisterer(reg))
			if err != nil {
				t.Fatal(err)
			}
			conn := rt.Conn(cc)
			h, err := runtime.NewStream(rt, method, func(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return conn.NewStream(ctx, &kind.desc, method, opts...)
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err := h.Call(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMsg(&inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
				t.Fatal(err)
			}
			for _, nilMsg := range []any{(*inventoryv1.WatchStockRequest)(nil), nil} {
				err := s.SendMsg(nilMsg)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "nil message") || !strings.Contains(err.Error(), method) {
					t.Errorf("SendMsg(%#v): %v, want INVALID_ARGUMENT naming a nil message and %s", nilMsg, err, method)
				}
			}
			if n := atkInUse(t, rt, method); n != 1 {
				t.Errorf("%d permits in use after the refused sends, want the stream's 1", n)
			}
			if err := s.SendMsg(&inventoryv1.WatchStockRequest{Sku: "b"}); err != nil {
				t.Fatalf("a send after the refused ones: %v, want the stream still open", err)
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if err := s.RecvMsg(new(inventoryv1.WatchStockResponse)); err != nil {
				t.Fatalf("the stream's answer: %v", err)
			}
			if kind.desc.ServerStreams {
				if err := s.RecvMsg(new(inventoryv1.WatchStockResponse)); !errors.Is(err, io.EOF) {
					t.Fatalf("after the answer: %v, want io.EOF", err)
				}
			}
			mu.Lock()
			if len(got) != 2 || got[0] != "a" || got[1] != "b" {
				t.Errorf("the server received %q, want only the two real messages [a b]", got)
			}
			mu.Unlock()
			atkWantFree(t, rt, method, "the stream ended")
			if st, _ := rt.BreakerState(method); st != runtime.StateClosed {
				t.Errorf("breaker %v, want closed", st)
			}
			if c := attemptsByCode(t, reg); len(c) != 1 || c["OK"] != 1 {
				t.Errorf("attempts counted by code %v, want the stream's one, OK", c)
			}
		})
	}
}

// attemptsByCode reads resilient_client_attempts_total from reg, by code.
func attemptsByCode(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "resilient_client_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
