package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack25dWaitersTakeOverOneAtATime: two replicas on one Redis, eight
// callers of each of six keys at once, four on each replica. Each key's
// first two runs fail transiently (UNAVAILABLE, not kept), the third
// answers. The README: "of any number of requests with the key … one runs
// the handler; the others replay its kept outcome or wait for it", and
// "when the first fails transiently …, a waiter takes the key over".
// Counted on the servers: no two runs of one key ever overlap, each key
// runs exactly three times (two forgotten failures, one answer, never a
// fourth), exactly two callers of each key get UNAVAILABLE (those whose
// own run failed: a forgotten failure is never replayed) and the other six
// get the one answer.
func TestAttack25dWaitersTakeOverOneAtATime(t *testing.T) {
	const keys, callers = 6, 8
	r := startRedis(t)
	var mu sync.Mutex
	active, overlap := map[string]int{}, map[string]bool{}
	srv := newScripted(func(_ context.Context, order string, run int) (*inventoryv1.ReserveStockResponse, error) {
		mu.Lock()
		active[order]++
		if active[order] > 1 {
			overlap[order] = true
		}
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		active[order]--
		mu.Unlock()
		if run <= 2 {
			return nil, status.Errorf(codes.Unavailable, "%s run %d: warehouse busy", order, run)
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: fmt.Sprint(order, "-", run)}, nil
	})
	p := reserveStockPolicy(2*time.Second, policy.StoreErrorRefuse)
	var replicas []inventoryv1.InventoryServiceClient
	for range 2 {
		_, c := guarded(t, srv, p, server.WithStore(New(warmClient(t, r.addr, 8), "takeover25d:")))
		replicas = append(replicas, c)
	}
	got := make([][]answered, keys)
	var wg sync.WaitGroup
	for k := range keys {
		got[k] = make([]answered, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[k][i] = callWithin(replicas[i%2], fmt.Sprint("to-", k), 10*time.Second)
			}()
		}
	}
	wg.Wait()
	for k := range keys {
		order := fmt.Sprint("to-", k)
		failed, answers := 0, 0
		for _, a := range got[k] {
			switch {
			case a.code == codes.Unavailable:
				failed++
			case a.code == codes.OK && a.id == order+"-3":
				answers++
			default:
				t.Errorf("%s: a caller got %v; want UNAVAILABLE of its own run or %s-3", order, a, order)
			}
		}
		if n := srv.count(order); n != 3 || failed != 2 || answers != callers-2 || overlap[order] {
			t.Errorf("%s: %d runs (overlapping: %v), %d callers UNAVAILABLE, %d answered; want 3 runs one at a time, 2, %d", order, n, overlap[order], failed, answers, callers-2)
		}
	}
}
