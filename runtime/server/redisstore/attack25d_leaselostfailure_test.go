package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack25dFailureAfterTheLeaseWasLostIsNotKept: the README keeps no
// failure "the handler gives once its request ended, whatever its code: a
// handler that formats its context's error into a status of its own
// (status.Errorf(codes.Internal, "%v", ctx.Err())) under a FinalCodes
// holding INTERNAL had the ending kept and replayed to every retry for the
// TTL, the operation never run", and of a handler cancelled with
// ErrLeaseLost: "its caller gets UNAVAILABLE and its retry runs the
// handler". The same handler, its context cancelled by the Guard because
// Redis lost the entry (FLUSHALL: a restart without persistence), gave
// INTERNAL "reserve: context canceled" without doing any work; the key
// being free, the Guard claimed it again and kept that failure as the
// outcome, and every retry was replayed INTERNAL for the TTL, the order
// never placed. A failure given once the Guard cancelled the handler's
// context is the cancellation's, as one given once the request ended: not
// kept, unless a call through ClientInterceptor may have done work.
func TestAttack25dFailureAfterTheLeaseWasLostIsNotKept(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	admin := client(t, r.addr)
	var srv *reserver
	srv = &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		if srv.runs.Load() > 1 {
			return nil
		}
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			return status.Errorf(codes.Internal, "flushall: %v", err)
		}
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), server.ErrLeaseLost) {
			return status.Errorf(codes.Internal, "cancelled with %v, want ErrLeaseLost", context.Cause(ctx))
		}
		return status.Errorf(codes.Internal, "reserve: %v", ctx.Err())
	}}
	p := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	p.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	g, c := guarded(t, srv, p, server.WithStore(New(client(t, r.addr), "lostfail25d:")))

	_, err := reserve(t, c, "k-lostfail", 5*time.Second)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "lost its hold") {
		t.Errorf("the caller whose handler was cancelled for the lost lease: %v; want UNAVAILABLE, lost its hold on the key", err)
	}
	again, err := reserve(t, c, "k-lostfail", 5*time.Second)
	if err != nil || again.GetReservationId() != "a-2" {
		t.Errorf("its retry: %q %v; want the handler run again, a-2 (the cancellation's failure not kept)", again.GetReservationId(), err)
	}
	if n, s := srv.runs.Load(), stats(t, g); n != 2 || s.LeasesLost != 1 || s.Replayed != 0 {
		t.Errorf("the handler ran %d times, %d leases lost, %d replays; want 2, 1, 0", n, s.LeasesLost, s.Replayed)
	}
}

// TestAttack25dFailureAfterASilentStoreCostTheLeaseIsNotKept: the same
// handler, its lease given up because Redis stopped answering (stalled
// for 5/4 of an 800 ms lease), Redis back before the entry lapses (3/2
// Lease): the key was never another's, and the handler's failure of its
// own formatting of its cancelled context (INTERNAL, under a FinalCodes
// holding INTERNAL) was written and replayed to every retry, the order
// never placed. It is the cancellation's failure: not kept, the caller
// gets UNAVAILABLE and the retry runs.
func TestAttack25dFailureAfterASilentStoreCostTheLeaseIsNotKept(t *testing.T) {
	const lease = 800 * time.Millisecond
	p := tcpproxy.Start(t, startRedis(t).addr)
	var srv *reserver
	srv = &reserver{answer: "s", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		if srv.runs.Load() > 1 {
			return nil
		}
		p.Stall()
		<-ctx.Done()
		p.Restore()
		if !errors.Is(context.Cause(ctx), server.ErrLeaseLost) {
			return status.Errorf(codes.Internal, "cancelled with %v, want ErrLeaseLost", context.Cause(ctx))
		}
		return status.Errorf(codes.Internal, "reserve: %v", ctx.Err())
	}}
	pol := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	pol.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	s := New(warmClient(t, p.Addr(), 4), "silentfail25d:")
	g, c := guarded(t, srv, pol, server.WithStore(s))
	loadScripts(t, s)

	_, err := reserve(t, c, "k-silentfail", 5*time.Second)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "lost its hold") {
		t.Errorf("the caller whose handler was cancelled for the lost lease: %v; want UNAVAILABLE, lost its hold on the key", err)
	}
	var again *inventoryv1.ReserveStockResponse
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		// Until Redis answers on fresh connections (Restore closed the
		// stalled ones) and the entry, if left pending, lapses.
		if again, err = reserve(t, c, "k-silentfail", 3*time.Second); status.Code(err) != codes.Unavailable {
			break
		}
	}
	if err != nil || again.GetReservationId() != "s-2" {
		t.Errorf("its retry: %q %v; want the handler run again, s-2", again.GetReservationId(), err)
	}
	if n, s := srv.runs.Load(), stats(t, g); n != 2 || s.LeasesLost != 1 || s.Replayed != 0 {
		t.Errorf("the handler ran %d times, %d leases lost, %d replays; want 2, 1, 0", n, s.LeasesLost, s.Replayed)
	}
}

// TestAttack25dFailureAfterTheLeaseWasLostAndAChargeIsKept: the other side
// of the rule. The handler's call through ClientInterceptor (a ledger
// that failed UNAVAILABLE, not a Guard's refusal at its door) may have
// charged before Redis lost the entry: its failure once cancelled is kept
// as FinalCodes say (the key was free, so claimed again), and the retry is
// replayed rather than charged again.
func TestAttack25dFailureAfterTheLeaseWasLostAndAChargeIsKept(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	admin := client(t, r.addr)
	ledger := &unavailableDep{}
	dep := dialDependency(t, ledger)
	var srv *reserver
	srv = &reserver{answer: "c", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		_, _ = dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "charge"})
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			return status.Errorf(codes.Internal, "flushall: %v", err)
		}
		<-ctx.Done()
		return status.Errorf(codes.Internal, "reserve: %v", ctx.Err())
	}}
	p := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	p.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	g, c := guarded(t, srv, p, server.WithStore(New(client(t, r.addr), "lostcharge25d:")))

	if _, err := reserve(t, c, "k-lostcharge", 5*time.Second); status.Code(err) != codes.Internal {
		t.Errorf("the caller: %v; want the handler's INTERNAL, kept", err)
	}
	if _, err := reserve(t, c, "k-lostcharge", 5*time.Second); status.Code(err) != codes.Internal {
		t.Errorf("its retry: %v; want INTERNAL replayed", err)
	}
	if n, l, s := srv.runs.Load(), ledger.calls.Load(), stats(t, g); n != 1 || l != 1 || s.Replayed != 1 {
		t.Errorf("the handler ran %d times, the ledger was called %d times, %d replays; want 1, 1, 1", n, l, s.Replayed)
	}
}
