package redisstore

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// bigReserver answers ReserveStock with a reservation id of size bytes.
type bigReserver struct {
	inventoryv1.UnimplementedInventoryServiceServer
	runs int
	size int
}

func (s *bigReserver) ReserveStock(context.Context, *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	s.runs++
	return &inventoryv1.ReserveStockResponse{ReservationId: strings.Repeat("r", s.size)}, nil
}

// TestAttack24dAnswerLongerThanARedisArgument: Redis takes no argument
// longer than its proto-max-bulk-len (512 MB by default; 1 MB, its least,
// here), and closes the connection of a command that sends one. A kept
// answer longer than that was sent as one argument: every write failed,
// retried for 5/4 Lease (the caller's answer held back that long), never
// kept, and a retry after the entry lapsed ran the handler again. (No
// write failing, none is retried: StoreErrors stays 0.) The
// outcome is sent in pieces shorter than Redis's least limit and joined
// by the script.
func TestAttack24dAnswerLongerThanARedisArgument(t *testing.T) {
	const lease = 400 * time.Millisecond
	addr := startRedis(t, "--proto-max-bulk-len", "1mb").addr
	srv := &bigReserver{size: 3 << 20}
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(client(t, addr), "big:")))
	send := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, "big-1")
		r, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "big-1", Sku: "a", Units: 1}, grpc.MaxCallRecvMsgSize(16<<20))
		return len(r.GetReservationId()), err
	}
	n, err := send()
	if err != nil || n != srv.size {
		t.Fatalf("the first: %d bytes %v, want its answer of %d", n, err, srv.size)
	}
	time.Sleep(lease + lease/2) // past the pending entry's lapse
	n2, err := send()
	if err != nil || n2 != srv.size {
		t.Errorf("the retry: %d bytes %v, want the replay of %d", n2, err, srv.size)
	}
	if srv.runs != 1 {
		t.Errorf("the handler ran %d times, want 1", srv.runs)
	}
	if s := stats(t, g); s.NotKept != 0 || s.StoreErrors != 0 || s.Replayed != 1 {
		t.Errorf("stats %+v: want the outcome kept and replayed", s)
	}
}

// TestAttack24dOutcomeInPiecesRoundTrips: outcomes of every length about
// the pieces' bounds are kept byte for byte, and the write sent again
// (its reply lost) finds its own outcome and succeeds.
func TestAttack24dOutcomeInPiecesRoundTrips(t *testing.T) {
	s := New(client(t, startRedis(t, "--proto-max-bulk-len", "1mb").addr), "pieces:")
	ctx := context.Background()
	fp := server.Fingerprint{7}
	for i, n := range []int{1, outcomePiece - 1, outcomePiece, outcomePiece + 1, 2 * outcomePiece, 2*outcomePiece + 1, 5 << 20} {
		key, token := "k"+strconv.Itoa(i), "t"+strconv.Itoa(i)
		out := make([]byte, n)
		for j := range out {
			out[j] = byte(j*31 + n)
		}
		if c, err := s.Claim(ctx, key, token, fp, time.Second); err != nil || c.State != server.Claimed {
			t.Fatalf("%d bytes: claim %+v %v", n, c, err)
		}
		for try := range 2 {
			if err := s.Complete(ctx, key, token, out, time.Minute); err != nil {
				t.Fatalf("%d bytes: write %d: %v", n, try+1, err)
			}
		}
		c, err := s.Claim(ctx, key, "other", fp, time.Second)
		if err != nil || c.State != server.Done || !bytes.Equal(c.Outcome, out) {
			t.Errorf("%d bytes: the kept outcome: state %v, %d bytes, equal %v, %v", n, c.State, len(c.Outcome), bytes.Equal(c.Outcome, out), err)
		}
		if err := s.Complete(ctx, key, token, out[:n-1], time.Minute); !errors.Is(err, server.ErrNotOwner) {
			t.Errorf("%d bytes: a write of another outcome over the kept one: %v, want ErrNotOwner", n, err)
		}
	}
}
