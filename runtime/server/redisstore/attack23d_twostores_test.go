package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23dTwoGuardsOnTwoStoresAcrossReplicas: two replicas, each with
// a library's Guard on its own memory store outside the service's Guard
// on the Redis they share, an interceptor of the server's own between the
// two that normalizes the request (the SKU upper-cased). The README: "the
// inner one deduplicates as it would alone, so that a retry on another
// replica is replayed, not run again". A client sends the key with
// another body on the second replica while the first request runs on the
// first: the inner Guard refuses it INVALID_ARGUMENT (the key is the
// first's), and the second replica's outer Guard kept that refusal under
// the other body's fingerprint, so that the first request's own retry on
// the second replica was refused INVALID_ARGUMENT ("already used by a
// different request") for the whole TTL instead of replayed. The inner
// Guard's refusal is this server's, not an answer, and is not kept: the
// retry is replayed on both replicas, the handler run once.
func TestAttack23dTwoGuardsOnTwoStoresAcrossReplicas(t *testing.T) {
	r := startRedis(t)
	rc := warmClient(t, r.addr, 4)
	p := reserveStockPolicy(time.Second, policy.StoreErrorRefuse)
	normalize := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if q, ok := req.(*inventoryv1.ReserveStockRequest); ok {
			q.Sku = strings.ToUpper(q.Sku)
		}
		return handler(ctx, req)
	}
	running, release := make(chan struct{}), make(chan struct{})
	srv := &reserver{answer: "split", hook: func(ctx context.Context, req *inventoryv1.ReserveStockRequest) error {
		if req.GetSku() != "ABC" {
			return status.Errorf(codes.Internal, "the handler got SKU %q, not the normalized ABC", req.GetSku())
		}
		select {
		case <-running:
		default:
			close(running)
			<-release
		}
		return nil
	}}
	var outers, inners []*server.Guard
	var clients []inventoryv1.InventoryServiceClient
	for range 2 {
		g1, err := server.NewGuard([]*policy.Server{p}, server.WithStore(server.NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		g2, err := server.NewGuard([]*policy.Server{p}, server.WithStore(New(rc, "idem:")))
		if err != nil {
			t.Fatal(err)
		}
		outers, inners = append(outers, g1), append(inners, g2)
		clients = append(clients, serveInventory(t, srv, grpc.InTapHandle(g1.TapHandle),
			grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, normalize, g2.UnaryInterceptor)))
	}
	call := func(c inventoryv1.InventoryServiceClient, sku string) (*inventoryv1.ReserveStockResponse, metadata.MD, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, "k-split")
		var trailer metadata.MD
		resp, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-split", Sku: sku, Units: 1}, grpc.Trailer(&trailer))
		return resp, trailer, err
	}
	first := make(chan error, 1)
	go func() {
		_, _, err := call(clients[0], "abc")
		first <- err
	}()
	<-running
	for i, c := range clients {
		if _, _, err := call(c, "xyz"); status.Code(err) != codes.InvalidArgument {
			t.Errorf("another body under the running key on replica %d: %v; want INVALID_ARGUMENT", i, err)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first request: %v", err)
	}
	for i, c := range clients {
		resp, trailer, err := call(c, "abc")
		if err != nil || resp.GetReservationId() != "split-1" || len(trailer.Get(server.ReplayedHeader)) != 1 {
			t.Errorf("the first request's retry on replica %d: %v, %v (trailer %v); want split-1 replayed", i, resp, err, trailer)
		}
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if s := stats(t, inners[1]); s.Mismatched != 1 {
		t.Errorf("the second replica's inner Guard refused %d other bodies; want 1", s.Mismatched)
	}
	if s0, s1 := stats(t, outers[0]), stats(t, outers[1]); s0.Mismatched != 1 || s1.Mismatched != 0 || s0.Replayed != 1 {
		t.Errorf("outer Guards: %d and %d mismatched, the first's replays %d; want 1, 0 and 1", s0.Mismatched, s1.Mismatched, s0.Replayed)
	}
}
