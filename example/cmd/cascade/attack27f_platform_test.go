package main

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

// catalogTally is what the requests of one scenario that do not call
// inventory saw: how long after its scheduled arrival each was answered.
type catalogTally struct {
	mu    sync.Mutex
	due   []time.Duration // scheduled arrival, from the run's start
	delay []time.Duration // answered this long after it
	fail  int
}

// within counts the catalog requests scheduled from `from` on that were
// answered within d of their arrival.
func (c *catalogTally) within(from, d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i, x := range c.delay {
		if c.due[i] >= from && x <= d {
			n++
		}
	}
	return n
}

func (c *catalogTally) p99() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.delay) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), c.delay...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*99/100)]
}

// TestAttack27FTheCascadeReachesTheRoutesThatDoNotCallInventory: the
// course's cascade (../shared/reference: "Kong answers 503 to EVERYTHING,
// including GET /catalog", "Letting the wait on inventory consume the
// threads catalog needs | Bulkhead") is the slow dependency taking down
// the routes that do not depend on it. The demonstration's caller has one
// route, GetStock, so its table says what happens to inventory's calls and
// not to the platform: "It stops a slow dependency from taking the caller
// down" (README, top) is shown there only as "waiting 0". Here the same
// caller (run, its 32 workers, 100 requests/s, the demonstration's
// scenarios and clients) serves every other request from a catalog that
// calls a healthy server of its own, and the catalog requests are counted
// by how long after their scheduled arrival they were answered.
//
// Without protection the slow inventory takes the catalog down with it;
// with the full stack every catalog request is answered about as fast as
// the catalog server answers. (The inventory server's count of calls at
// once is logged: it may exceed the bulkhead's 8 by the calls whose
// timeout returned their permit before their cancellation reached it.)
func TestAttack27FTheCascadeReachesTheRoutesThatDoNotCallInventory(t *testing.T) {
	skipShape(t)
	c := config{
		load:        load{rate: 100, duration: 2 * time.Second, workers: 32},
		latency:     20 * time.Millisecond,
		slowLatency: 2 * time.Second,
		slowAt:      500 * time.Millisecond,
		parallel:    true,
	}
	catalogSrv, err := server.Start("127.0.0.1:0", server.Slow(c.latency))
	if err != nil {
		t.Fatal(err)
	}
	defer catalogSrv.Stop()
	catalogCC, err := grpc.NewClient(catalogSrv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer catalogCC.Close()
	catalog := inventoryv1.NewInventoryServiceClient(catalogCC)

	names := []string{"none", "timeout", "full"}
	tallies := map[string]*catalogTally{}
	starts := map[string]*atomic.Pointer[time.Time]{}
	for _, n := range names {
		tallies[n], starts[n] = &catalogTally{}, &atomic.Pointer[time.Time]{}
	}
	slow := func(elapsed time.Duration) server.Behaviour {
		if elapsed >= c.slowAt {
			return server.Slow(c.slowLatency)
		}
		return server.Slow(c.latency)
	}
	build := func(name string, cc grpc.ClientConnInterface) (call, error) {
		var inner call
		if edit := scenarioPolicies[name]; edit == nil {
			inner = plainCall(cc)
		} else {
			var err error
			if inner, err = resilientCall(cc, edit, name == "full"); err != nil {
				return nil, err
			}
		}
		tally, start := tallies[name], starts[name]
		var taken atomic.Int64
		// The workers take requests in their order of arrival: the k-th
		// taken arrived at start + k/rate (or later, if the generator was
		// late). Every odd one is a catalog request.
		return func(ctx context.Context) (error, error) {
			k := taken.Add(1) - 1
			if k%2 == 0 {
				return inner(ctx)
			}
			_, err := catalog.GetStock(ctx, request)
			due := time.Duration(k) * time.Second / time.Duration(c.rate)
			tally.mu.Lock()
			if err != nil {
				tally.fail++
			} else {
				tally.due = append(tally.due, due)
				tally.delay = append(tally.delay, time.Since(start.Load().Add(due)))
			}
			tally.mu.Unlock()
			return err, nil
		}, nil
	}
	// What the machine adds to an uncontended call meanwhile (cascade_test.go).
	baseline := probe(t, c.rate, c.duration+time.Second, c.latency)
	results, deps, err := runScenarios(c, names, slow, c.slowAt, c.duration, build, func(name string) {
		now := time.Now()
		starts[name].Store(&now)
	})
	base := baseline()
	if err != nil {
		t.Fatal(err)
	}
	logRun(t, base)
	fast := 100 * time.Millisecond
	// The 32 workers are full of 2 s calls about 0.64 s after the slowdown
	// (16 inventory requests a second each hold one); catalog requests
	// scheduled from a second after it on are the cascade's.
	after := c.slowAt + time.Second
	late := int((c.duration - after) * time.Duration(c.rate) / time.Second / 2)
	for i, r := range results {
		logRun(t, r)
		tl := tallies[names[i]]
		t.Logf("  catalog: %d of %d answered (%d failed), %d within %v of arrival, p99 %v; of the %d scheduled from t=%v: %d within %v, %d within 1s; inventory saw at most %d calls at once, %d from t=%v",
			len(tl.delay), r.sent/2, tl.fail, tl.within(0, fast), fast, tl.p99().Round(time.Millisecond), late, after, tl.within(after, fast), fast, tl.within(after, time.Second),
			deps[i].srv.MaxInFlight(), deps[i].inPhase.Load(), c.slowAt)
	}
	full := results[2]
	// No protection: the cascade. Catalog requests need no inventory, yet
	// those scheduled once the workers are taken wait for a worker freed
	// by a 2 s call: fewer than a fifth are answered within a second.
	if n := tallies["none"].within(after, time.Second); n >= late/5 {
		t.Errorf("no protection: %d of the %d catalog requests scheduled from t=%v answered within 1s of arrival; want the slow inventory to take them down (the cascade)", n, late, after)
	}
	// Full stack: every catalog request answered within 100 ms of its
	// arrival (five times the catalog's 20 ms), plus twice how late the
	// generator was and twice the probe's p99 (a few ms on an idle
	// machine), whatever inventory does.
	margin := fast + 2*full.late + 2*base.percentile(0.99)
	arrivals := full.sent / 2
	if tl := tallies["full"]; tl.within(0, margin) < arrivals*98/100 || tl.fail != 0 || tl.within(after, margin) < late*98/100 {
		t.Errorf("full stack: %d of %d catalog requests answered within %v of arrival (generator at most %v late, uncontended calls' p99 %v), %d of the %d from t=%v, %d failed; want them all: the slow inventory must not take the caller's workers",
			tl.within(0, margin), arrivals, margin, full.late, base.percentile(0.99), tl.within(after, margin), late, after, tl.fail)
	}
	if full.counts[outWaiting] != 0 || full.counts[outOK]+full.counts[outFallback] != full.sent {
		t.Errorf("full stack: %v of %d; want every request answered, by its server or the fallback", full.counts, full.sent)
	}
}
