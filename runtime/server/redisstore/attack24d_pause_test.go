package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// fixedReserver answers every ReserveStock with the same response (an
// idempotent service's answer carries no run count), running hook first.
type fixedReserver struct {
	inventoryv1.UnimplementedInventoryServiceServer
	runs atomic.Int64
	hook func()
}

func (s *fixedReserver) ReserveStock(context.Context, *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	s.runs.Add(1)
	if s.hook != nil {
		s.hook()
	}
	return &inventoryv1.ReserveStockResponse{ReservationId: "reserved"}, nil
}

// reserveFixed sends ReserveStock with key and one body for every key.
func reserveFixed(c inventoryv1.InventoryServiceClient, key string, d time.Duration) (*inventoryv1.ReserveStockResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
	return c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
}

// TestAttack24dReplicaPausedPastItsLease: replica A's process is frozen
// (SIGSTOP: a stopped VM, a stop-the-world pause) while its handler runs,
// for longer than 3/2 Lease. Its entry lapses in Redis and replica B
// takes the key over, runs the handler and keeps its outcome, the same
// bytes as A's (an idempotent answer). A resumes: its handler returns at
// once, before A's lease keeper (whose timer expired during the freeze
// too) has run. Two runs, which the README allows for a freeze; but
// before, whenever the handler's return won that race, A's Complete found
// the key done with its very outcome (the write of a lost reply, retried)
// and reported it written: A's caller answered, LeasesLost 0, nothing
// logged, the second run unnoticed. A handler that returns past 5/4 Lease
// after the last renewal lost its lease whichever goroutine runs first.
func TestAttack24dReplicaPausedPastItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes the test process")
	}
	for _, tool := range []string{"sh", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: the test freezes itself with a shell, and writes the other replica's entry with redis-cli", tool)
		}
	}
	const lease = 200 * time.Millisecond
	r := startRedis(t)
	const prefix = "pause:"
	rc := client(t, r.addr)
	srv := &fixedReserver{}
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(New(rc, prefix)))
	ctx := context.Background()

	// B's entry: the request's outcome kept under another key, the same
	// bytes B keeps for this one.
	if _, err := reserveFixed(c, "p-0", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	skey := func(k string) string { return prefix + reserveStock + ":0::" + k }
	entry, err := rc.Get(ctx, skey("p-0")).Bytes()
	if err != nil || len(entry) == 0 || entry[0] != 'd' {
		t.Fatalf("the kept entry: %q %v", entry, err)
	}
	file := filepath.Join(t.TempDir(), "entry")
	if err := os.WriteFile(file, entry, 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(r.addr, ":")

	const tries = 6
	unnoticed := 0
	for i := range tries {
		key := fmt.Sprintf("p-%d", i+1)
		before := stats(t, g).LeasesLost
		var child *exec.Cmd
		marker := filepath.Join(t.TempDir(), "resumed")
		srv.hook = func() {
			// Frozen for 2 Leases (the entry lapses at 3/2); meanwhile B,
			// on another replica, takes the lapsed key over and keeps its
			// outcome. The handler returns as soon as the process resumes.
			cmd := exec.Command("sh", "-c", fmt.Sprintf(
				"kill -STOP %[1]d; sleep %.3[2]f; redis-cli -p %[3]s -x SET '%[4]s' < '%[5]s' >/dev/null; touch '%[6]s'; kill -CONT %[1]d",
				os.Getpid(), (2*lease).Seconds(), port, skey(key), file, marker))
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			child = cmd
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if _, err := os.Stat(marker); err == nil {
					return
				}
			}
			t.Error("never frozen and resumed")
		}
		resp, err := reserveFixed(c, key, 5*time.Second)
		srv.hook = nil
		if child != nil {
			_ = child.Wait()
		}
		t.Logf("%s: %q %v; %+v", key, resp.GetReservationId(), err, stats(t, g))
		if stats(t, g).LeasesLost == before {
			unnoticed++
		}
	}
	if unnoticed > 0 {
		t.Errorf("%d of %d requests frozen past their lease, the key run by another replica meanwhile, returned without their lease lost (Stats.LeasesLost not counted, nothing logged)", unnoticed, tries)
	}
}
