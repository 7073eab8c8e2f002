package runtime_test

// Attack on the README's Streams: "From its opening to its end a stream
// holds one bulkhead permit … given back at once on each of these endings"
// and on Conn's "SendMsg refuses a nil message (INVALID_ARGUMENT, nothing
// sent, the stream still open)": hand-written code calling the plain
// generated client on Client.Conn (Invoke's doc names such code) with a nil
// request of a server-streaming method. protoc-gen-go-grpc's WatchStock
// sends the request inside the method and, on SendMsg's error, returns nil
// and the error: the caller gets no stream to cancel or read, so a stream
// the runtime keeps open after refusing the nil keeps its permit for as
// long as its context lives.

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttack24eNilRequestOfAPlainServerStreamGivesItsPermitBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkWatchStock)
		// A timeout far past the test: only the refusal itself may give the
		// permit back.
		m.Timeout, m.OverallTimeout = time.Hour, 0
		m.Bulkhead.MaxWait = 0
	})
	rt := c.Runtime()
	plain := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	permits := 0
	for _, m := range rt.Policy().Methods {
		if m.Name == atkWatchStock {
			permits = m.Bulkhead.Permits
		}
	}
	if permits == 0 {
		t.Fatal("WatchStock has no bulkhead of its own")
	}
	for i := range permits + 1 {
		st, err := plain.WatchStock(ctx, nil)
		if status.Code(err) != codes.InvalidArgument || st != nil {
			t.Fatalf("nil request %d: (%v, %v), want (nil, INVALID_ARGUMENT)", i+1, st, err)
		}
		if errors.Is(err, runtime.ErrBulkheadFull) {
			t.Fatalf("nil request %d refused by a full bulkhead", i+1)
		}
		if n := atkInUse(t, rt, atkWatchStock); n != 0 {
			t.Fatalf("%d permits taken after nil request %d, whose stream the caller never got", n, i+1)
		}
	}
	// The method still works, and the server never saw the refused ones.
	st, err := plain.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = st.Recv()
	}
	if got := fs.Calls(atkWatchStock); got != 1 {
		t.Errorf("the server saw %d streams, want 1", got)
	}
	atkWantNoPermits(t, rt, atkWatchStock, "after the last stream's io.EOF")
}

// A nil *grpc.StreamDesc given to Conn's NewStream (hand-written code) is
// bad input: refused with INVALID_ARGUMENT naming the method, nothing
// taken, never a nil-pointer panic, on a method with a policy as on one
// without (for which grpc-go would panic the same way).
func TestAttack24eNilStreamDescIsRefused(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	rt, conn, reg := atk24eClient(t, cc, time.Second)
	for _, method := range []string{atk24eChat, "/atk24e.S/NoPolicy"} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: NewStream with a nil desc panicked: %v", method, r)
				}
			}()
			_, err = conn.NewStream(context.Background(), nil, method)
		}()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), method) || !strings.Contains(err.Error(), "StreamDesc") {
			t.Errorf("%s: a nil desc: %v, want INVALID_ARGUMENT naming the method and the StreamDesc", method, err)
		}
	}
	if n := atkInUse(t, rt, atk24eChat); n != 0 {
		t.Errorf("%d permits after a nil desc", n)
	}
	if got := atk24eAttempts(t, reg, atk24eChat); len(got) != 0 {
		t.Errorf("attempts_total %v after a nil desc, want none", got)
	}
}

// A nil sent on a server stream after its request (hand-written code) is
// refused and leaves the stream as it was: only a nil in place of the
// request, which the plain client's method returns without the stream,
// ends it.
func TestAttack24eNilAfterTheRequestOfAServerStreamLeavesItOpen(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	rt, conn, reg := atk24eClient(t, cc, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := conn.NewStream(ctx, &atk24eWatchDesc, atk24eWatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("ok")); err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg((*wrapperspb.StringValue)(nil)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a nil after the request: %v, want INVALID_ARGUMENT", err)
	}
	if n := atkInUse(t, rt, atk24eWatch); n != 1 {
		t.Fatalf("%d permits taken by the open stream, want 1", n)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for err == nil {
		if err = cs.RecvMsg(new(wrapperspb.StringValue)); err == nil {
			n++
		}
	}
	if err != io.EOF || n != 3 {
		t.Fatalf("read %d messages then %v, want 3 then io.EOF", n, err)
	}
	atkWantNoPermits(t, rt, atk24eWatch, "after io.EOF")
	if got := atk24eAttempts(t, reg, atk24eWatch); len(got) != 1 || got["OK"] != 1 {
		t.Errorf("attempts_total %v, want one OK", got)
	}
}
