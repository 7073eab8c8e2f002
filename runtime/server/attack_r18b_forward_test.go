package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// streamRelay's GetStock opens a WatchStock stream to next, with ctx
// raised to critical by the handler when raise is set, and reads one
// message.
type streamRelay struct {
	inventoryv1.UnimplementedInventoryServiceServer
	next  inventoryv1.InventoryServiceClient
	raise bool
}

func (r *streamRelay) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	if r.raise {
		ctx = runtime.WithPriority(ctx, PriorityCritical)
	}
	st, err := r.next.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: req.GetSku()})
	if err != nil {
		return nil, err
	}
	if _, err := st.Recv(); err != nil {
		return nil, err
	}
	return &inventoryv1.GetStockResponse{}, nil
}

// TestAttackR18bStreamClientInterceptorForwardsPriority: a handler serving
// a low request opens a stream to its dependency through a connection
// dialled with StreamClientInterceptor: the dependency sees low, also when
// the handler tries to raise it to critical for that call (the lowest
// value sent wins there). Without the interceptor, the stream carries no
// priority and the dependency would take its annotation.
func TestAttackR18bStreamClientInterceptorForwardsPriority(t *testing.T) {
	for _, c := range []struct {
		name        string
		interceptor bool
		raise       bool
		want        []string
	}{
		{"forwarded", true, false, []string{"low"}},
		{"raised by the handler", true, true, []string{"critical", "low"}},
		{"without the interceptor", false, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := make(chan []string, 1)
			next := &inventoryServer{}
			next.sawCtx = func(ctx context.Context) {
				md, _ := metadata.FromIncomingContext(ctx)
				seen <- md.Get(PriorityHeader)
			}
			var opts []grpc.DialOption
			if c.interceptor {
				opts = append(opts, grpc.WithChainStreamInterceptor(StreamClientInterceptor()))
			}
			nextCC := dial(t, serve(t, next), opts...)
			srv := &streamRelay{next: inventoryv1.NewInventoryServiceClient(nextCC), raise: c.raise}
			_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
			if _, err := client.GetStock(runtime.WithPriority(ctxTimeout(t, time.Second), PriorityLow), &inventoryv1.GetStockRequest{}); err != nil {
				t.Fatal(err)
			}
			got := <-seen
			if len(got) != len(c.want) {
				t.Fatalf("dependency saw priority %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("dependency saw priority %q, want %q", got, c.want)
				}
			}
			if c.interceptor {
				if p := effectivePriority(metadata.MD{PriorityHeader: got}, PriorityCritical); p != PriorityLow {
					t.Errorf("a Guard there would grant %s, want low", p)
				}
			}
		})
	}
}
