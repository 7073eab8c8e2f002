package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23sLeaseLostCauseIsNotKept: Redis loses the entry of a
// running request (FLUSHALL, as a restart without persistence or a
// failover does); the renewal finds it gone and the Guard cancels the
// handler with the cause server.ErrLeaseLost, which the handler returns
// (context.Cause(ctx) wrapped, or status.FromContextError of it). Under a FinalCodes
// holding UNKNOWN, that error, UNKNOWN to gRPC, was taken for the
// handler's answer: the Guard claimed the free key again and kept it, its
// caller got UNKNOWN "...lost its idempotency key's lease", and every
// retry of the key got it replayed for the whole TTL, the order never
// placed. The Guard's own cancellation is never an answer: the caller gets
// UNAVAILABLE, its retry runs the handler, and Redis keeps that answer.
func TestAttack23sLeaseLostCauseIsNotKept(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	admin := client(t, r.addr)
	for i, tc := range []struct {
		name string
		end  func(ctx context.Context) error
	}{
		{"the cause wrapped", func(ctx context.Context) error { return fmt.Errorf("reserve stopped: %w", context.Cause(ctx)) }},
		{"the cause as a status", func(ctx context.Context) error { return status.FromContextError(context.Cause(ctx)).Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("lc-%d", i)
			var srv *reserver
			srv = &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
				if srv.runs.Load() > 1 {
					return nil
				}
				if err := admin.FlushAll(context.Background()).Err(); err != nil {
					return status.Errorf(codes.Internal, "flushall: %v", err)
				}
				<-ctx.Done()
				return tc.end(ctx)
			}}
			p := reserveStockPolicy(lease, policy.StoreErrorRefuse)
			p.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Unknown)
			g, c := guarded(t, srv, p, server.WithStore(New(client(t, r.addr), "lostcause:")))

			start := time.Now()
			_, err := reserve(t, c, key, 5*time.Second)
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "lost its hold") {
				t.Fatalf("the caller whose entry was lost: %v after %s; want UNAVAILABLE, lost its hold on the key", err, time.Since(start).Round(time.Millisecond))
			}
			again, err := reserve(t, c, key, 5*time.Second)
			if err != nil || again.GetReservationId() != "a-2" {
				t.Fatalf("its retry: %q %v; want the handler run again, a-2", again.GetReservationId(), err)
			}
			if n := srv.commits.Load(); n != 1 {
				t.Errorf("the handler committed %d times, want 1 (the retry)", n)
			}
			if s := stats(t, g); s.LeasesLost != 1 || s.Replayed != 0 {
				t.Errorf("leases lost %d, replays %d; want 1 and 0", s.LeasesLost, s.Replayed)
			}
			keys, err := admin.Keys(context.Background(), "lostcause:*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("keys in Redis: %q %v; want the one of %s", keys, err, key)
			}
			v, err := admin.Get(context.Background(), keys[0]).Result()
			if err != nil || v[0] != 'd' || !strings.Contains(v, "a-2") {
				t.Errorf("the entry of %s: %q %v; want done, holding the retry's a-2", key, v, err)
			}
		})
	}
	if !errors.Is(server.ErrLeaseLost, context.Canceled) {
		t.Error("ErrLeaseLost is not a cancellation: errors.Is(ErrLeaseLost, context.Canceled) is false")
	}
}
