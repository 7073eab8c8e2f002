// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

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
// opened goes to grpc-go as it is: the server receives an empty message
// and the caller no error. A server counting what it received on loopback
// says which.
func TestNewcomerNilMessageOnAClientStream(t *testing.T) {
	t.Skip("BROKEN: Send(nil) on a client or bidi stream opened by runtime.NewStream sends an empty message and returns nil; a unary handle refuses a nil request with INVALID_ARGUMENT")
	var mu sync.Mutex
	var got []int // the size of each message the server received
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
			got = append(got, len(in.GetSku()))
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

	const method = "/example.inventory.v1.InventoryService/Upload"
	p := policy.Service{Name: "example.inventory.v1.InventoryService",
		Methods: []policy.Method{{Name: method, Kind: policy.KindClientStreaming}}}
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	desc := &grpc.StreamDesc{StreamName: "Upload", ClientStreams: true}
	h, err := runtime.NewStream(rt, method, func(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return conn.NewStream(ctx, desc, method, opts...)
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
	sendErr := s.SendMsg((*inventoryv1.WatchStockRequest)(nil))
	_ = s.CloseSend()
	if err := s.RecvMsg(new(inventoryv1.WatchStockResponse)); err != nil && !errors.Is(err, io.EOF) && sendErr == nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if status.Code(sendErr) != codes.InvalidArgument || len(got) != 1 {
		t.Errorf("Send(nil) on a client stream: error %v, server received %d messages (sizes %v); want INVALID_ARGUMENT and only the first message", sendErr, len(got), got)
	}
}
