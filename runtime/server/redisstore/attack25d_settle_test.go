package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// unavailableDep is a dependency whose GetStock always fails UNAVAILABLE
// (a ledger that is down), counting its calls.
type unavailableDep struct {
	inventoryv1.UnimplementedInventoryServiceServer
	calls atomic.Int64
}

func (d *unavailableDep) GetStock(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	d.calls.Add(1)
	return nil, status.Error(codes.Unavailable, "ledger down")
}

// dialDependency serves dep on loopback and returns a client of it dialled
// as a service dials its own dependencies: with server.ClientInterceptor,
// so that the Guard serving the request sees how the call ended.
func dialDependency(t *testing.T, dep inventoryv1.InventoryServiceServer) inventoryv1.InventoryServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	inventoryv1.RegisterInventoryServiceServer(s, dep)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(server.ClientInterceptor()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		s.Stop()
		<-done
	})
	return inventoryv1.NewInventoryServiceClient(cc)
}

// reserveTrailer is reserve returning the answer's trailer too.
func reserveTrailer(t *testing.T, c inventoryv1.InventoryServiceClient, key string, d time.Duration) (*inventoryv1.ReserveStockResponse, metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
	var tr metadata.MD
	resp, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: key, Sku: "a", Units: 1}, grpc.Trailer(&tr))
	return resp, tr, err
}

// TestAttack25dOuterGuardDoesNotKeepTheInnersLostLease: settle's refusal
// pass-through. Two Guards on one server, the outer (a library's) on a
// memory store with a FinalCodes holding UNAVAILABLE, the inner (the
// service's) on Redis. The handler's call to its ledger fails UNAVAILABLE
// (recorded by ClientInterceptor in both Guards' records), then Redis
// loses the entry (FLUSHALL, a restart without persistence) and the inner
// Guard's renewal finds the key gone: the handler is cancelled with
// ErrLeaseLost, honours it, and the inner Guard answers UNAVAILABLE
// ("lost its hold"), unmarked, a refusal of this server's. The README: the
// outer one never keeps, whatever its FinalCodes hold, the inner one's
// refusals "whose outcome is another request's (a lost lease)". Were
// the outer to settle it as a handler's failure, the transient code after
// a dependency's transient failure would get the do-not-retry mark, a new
// error no longer known as a refusal, which its FinalCodes keep: the
// caller's retry would be replayed UNAVAILABLE for the TTL and the order
// never placed. The retry runs the handler (the key is free, nobody
// holds it), that answer is kept, and the next repeat replays it.
func TestAttack25dOuterGuardDoesNotKeepTheInnersLostLease(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	admin := client(t, r.addr)
	ledger := &unavailableDep{}
	dep := dialDependency(t, ledger)
	var srv *reserver
	srv = &reserver{answer: "r", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		if srv.runs.Load() > 1 {
			return nil // the retry commits
		}
		if _, err := dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
			return status.Errorf(codes.Internal, "the ledger answered %v, want UNAVAILABLE (the test's premise)", err)
		}
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			return status.Errorf(codes.Internal, "flushall: %v", err)
		}
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), server.ErrLeaseLost) {
			return status.Errorf(codes.Internal, "cancelled with %v, want ErrLeaseLost", context.Cause(ctx))
		}
		return status.FromContextError(context.Cause(ctx)).Err()
	}}
	outerPol := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	outerPol.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Unavailable)
	outer, err := server.NewGuard([]*policy.Server{outerPol}, server.WithStore(server.NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := server.NewGuard([]*policy.Server{reserveStockPolicy(lease, policy.StoreErrorRefuse)},
		server.WithStore(New(client(t, r.addr), "settle25d:")))
	if err != nil {
		t.Fatal(err)
	}
	c := serveInventory(t, srv, grpc.InTapHandle(outer.TapHandle),
		grpc.ChainUnaryInterceptor(outer.UnaryInterceptor, inner.UnaryInterceptor))

	_, tr, err := reserveTrailer(t, c, "k-settle", 5*time.Second)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "lost its hold") {
		t.Fatalf("the first caller: %v; want UNAVAILABLE, lost its hold on the key", err)
	}
	if server.IsDoNotRetry(err) || len(tr.Get(server.PushbackHeader)) != 0 {
		t.Errorf("the first caller's answer is marked do-not-retry (%v, trailer %v): the outer Guard took the inner's refusal for the handler's failure", err, tr)
	}
	resp, tr, err := reserveTrailer(t, c, "k-settle", 5*time.Second)
	if err != nil || resp.GetReservationId() != "r-2" || len(tr.Get(server.ReplayedHeader)) != 0 {
		t.Fatalf("the retry: %q %v (trailer %v); want the handler run again, r-2, not a replay", resp.GetReservationId(), err, tr)
	}
	resp, tr, err = reserveTrailer(t, c, "k-settle", 5*time.Second)
	if err != nil || resp.GetReservationId() != "r-2" || len(tr.Get(server.ReplayedHeader)) != 1 {
		t.Fatalf("the next repeat: %q %v (trailer %v); want r-2 replayed", resp.GetReservationId(), err, tr)
	}
	if n, m, l := srv.runs.Load(), srv.commits.Load(), ledger.calls.Load(); n != 2 || m != 1 || l != 1 {
		t.Errorf("the handler ran %d times, committed %d, called the ledger %d; want 2, 1, 1", n, m, l)
	}
	if s := stats(t, inner); s.LeasesLost != 1 {
		t.Errorf("the inner Guard lost %d leases, want 1", s.LeasesLost)
	}
	if s := stats(t, outer); s.MarkedDoNotRetry != 0 || s.Replayed != 1 {
		t.Errorf("the outer Guard marked %d, replayed %d; want 0 and 1", s.MarkedDoNotRetry, s.Replayed)
	}
}
