package runtime_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

// TestAttack20cSharedCallSendsTheRequestsUnknownFields: the shared call of
// a cache sends a copy of the leader's request. A request carrying fields
// this client's schema does not know (a newer client's, relayed by a
// proxy) must reach the dependency with them, as the same call without the
// cache sends them; and the leader changing those bytes in place after it
// gave up changes nothing of what the shared call's retry sends. A 1 MiB
// request is copied and sent whole.
func TestAttack20cSharedCallSendsTheRequestsUnknownFields(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	var sent [][]byte
	record := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if m, ok := req.(proto.Message); ok && method == atkGetStock {
			mu.Lock()
			sent = append(sent, bytes.Clone(m.ProtoReflect().GetUnknown()))
			mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	release := make(chan struct{})
	first := true
	var fmu sync.Mutex
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		fmu.Lock()
		f := first
		first = false
		fmu.Unlock()
		if f {
			<-release
			return status.Error(codes.Unavailable, "injected first attempt")
		}
		return nil
	}, record)
	c := attack20bCachedRetrying(t, cc)

	unknown := protowire.AppendTag(nil, 999, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("from a newer schema"))
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	req.ProtoReflect().SetUnknown(bytes.Clone(unknown))

	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetStock(lctx, req)
		done <- err
	}()
	atkWaitFor(t, "the first attempt reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })
	// Another caller of the key joins the shared call and waits for its
	// retry.
	other := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		other <- err
	}()
	time.Sleep(50 * time.Millisecond) // the other caller has joined
	cancel()
	<-done
	// The leader owns its request again: it scribbles on the unknown bytes
	// in place, as a pooled buffer would be reused.
	u := req.ProtoReflect().GetUnknown()
	for i := range u {
		u[i] = 'x'
	}
	close(release)
	if err := <-other; err != nil {
		t.Fatalf("the other caller of apple: %v", err)
	}
	mu.Lock()
	got := sent
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("the interceptor saw %d attempts, want 2 (the first and the shared call's retry)", len(got))
	}
	for i, b := range got {
		if !bytes.Equal(b, unknown) {
			t.Errorf("attempt %d sent unknown fields %q, want the leader's %q as it was when it called", i+1, b, unknown)
		}
	}

	big := &inventoryv1.GetStockRequest{Sku: strings.Repeat("b", 1<<20)}
	ctx, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if _, err := c.GetStock(ctx, big); err != nil {
		t.Fatalf("a 1 MiB cached request: %v", err)
	}
}

// TestAttack20cCachedNilRequestIsRefusedWithoutACall: a nil request, and a
// typed nil one, to a cached method fail INVALID_ARGUMENT before the cache
// (no key is made of it, no shared call copies it) and send nothing.
func TestAttack20cCachedNilRequestIsRefusedWithoutACall(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := attack20bCachedRetrying(t, cc)
	var typed *inventoryv1.GetStockRequest
	for _, req := range []*inventoryv1.GetStockRequest{nil, typed} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("nil request to a cached method panicked: %v", p)
				}
			}()
			if _, err := c.GetStock(context.Background(), req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("nil request: %v, want INVALID_ARGUMENT", err)
			}
		}()
	}
	if n := srv.Calls(atkGetStock); n != 0 {
		t.Errorf("server saw %d GetStock, want 0", n)
	}
}
