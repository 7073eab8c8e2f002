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

// TestAttack23aLeaseLostThroughChainsAndDeafHandlers: Redis loses the
// entry of a running request (FLUSHALL, as a restart without persistence
// or a failover does); the renewal finds it gone and the Guard cancels its
// handler with the cause server.ErrLeaseLost, under a FinalCodes holding
// UNKNOWN. A handler that returns the cause (wrapped, as a status through
// status.FromContextError, joined with an error of its own by errors.Join
// or two %w, wrapped twice) ends CANCELLED to gRPC, never kept (it was
// kept as UNKNOWN before 7766c0e and 33f6b2b, replayed to every retry for
// the TTL, the order never placed): its caller gets UNAVAILABLE, its retry
// runs, Redis keeps that answer. A handler deaf to its context, which commits after the loss
// and answers, ran once: the key was free, so its answer is kept and
// given to its caller, and the retry replays it.
func TestAttack23aLeaseLostThroughChainsAndDeafHandlers(t *testing.T) {
	const lease = 400 * time.Millisecond
	r := startRedis(t)
	admin := client(t, r.addr)
	for i, tc := range []struct {
		name string
		end  func(ctx context.Context) error // nil: the handler ignores its context and commits
	}{
		{"the cause wrapped", func(ctx context.Context) error { return fmt.Errorf("reserve stopped: %w", context.Cause(ctx)) }},
		{"the cause as a status", func(ctx context.Context) error { return status.FromContextError(context.Cause(ctx)).Err() }},
		{"errors.Join of the cause and a rollback error", func(ctx context.Context) error {
			return errors.Join(errors.New("rollback: connection reset"), context.Cause(ctx))
		}},
		{"two %w, the cause second", func(ctx context.Context) error {
			return fmt.Errorf("reserve: %w (cleanup: %w)", errors.New("partial"), context.Cause(ctx))
		}},
		{"the cause wrapped twice", func(ctx context.Context) error {
			return fmt.Errorf("handler: %w", fmt.Errorf("db: %w", context.Cause(ctx)))
		}},
		{"a handler deaf to its context", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("lc23a-%d", i)
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
				if tc.end == nil {
					return nil // commits all the same
				}
				return tc.end(ctx)
			}}
			p := reserveStockPolicy(lease, policy.StoreErrorRefuse)
			p.Methods[0].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Unknown)
			g, c := guarded(t, srv, p, server.WithStore(New(client(t, r.addr), "lost23a:")))

			first, err := reserve(t, c, key, 5*time.Second)
			if tc.end == nil {
				if err != nil || first.GetReservationId() != "a-1" {
					t.Fatalf("the deaf handler's caller: %q %v; want its answer a-1 (the key was free, its outcome kept)", first.GetReservationId(), err)
				}
				again, err := reserve(t, c, key, 5*time.Second)
				if err != nil || again.GetReservationId() != "a-1" {
					t.Fatalf("its retry: %q %v; want a-1 replayed", again.GetReservationId(), err)
				}
				if n, s := srv.runs.Load(), stats(t, g); n != 1 || s.Replayed != 1 {
					t.Errorf("the handler ran %d times, %d replays; want 1 and 1", n, s.Replayed)
				}
				return
			}
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "lost its hold") {
				t.Fatalf("the caller whose entry was lost: %v; want UNAVAILABLE, lost its hold on the key", err)
			}
			again, err := reserve(t, c, key, 5*time.Second)
			if err != nil || again.GetReservationId() != "a-2" {
				t.Fatalf("its retry: %q %v; want the handler run again, a-2", again.GetReservationId(), err)
			}
			if n, s := srv.commits.Load(), stats(t, g); n != 1 || s.LeasesLost != 1 || s.Replayed != 0 {
				t.Errorf("commits %d, leases lost %d, replays %d; want 1 (the retry), 1, 0", n, s.LeasesLost, s.Replayed)
			}
			keys, err := admin.Keys(context.Background(), "lost23a:*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("keys in Redis: %q %v; want the one of %s", keys, err, key)
			}
			if v, err := admin.Get(context.Background(), keys[0]).Result(); err != nil || v[0] != 'd' || !strings.Contains(v, "a-2") {
				t.Errorf("the entry of %s: %q %v; want done, holding the retry's a-2", key, v, err)
			}
		})
	}
	if !errors.Is(server.ErrLeaseLost, context.Canceled) {
		t.Error("ErrLeaseLost is not a cancellation: errors.Is(ErrLeaseLost, context.Canceled) is false")
	}
}
