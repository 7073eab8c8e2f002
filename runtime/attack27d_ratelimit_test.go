package runtime_test

// Attacks on the rate limit's own bucket (README, Semantics, "Rate limit",
// and "Order of the layers"): a token handed over as the caller's context
// ends, the order of the queue with callers leaving it, the waits each
// caller is promised, and what a refusal says.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk27dCtx is a caller's context that runs hook the first time the
// runtime asks for its Done channel: that is in the rate limit's wait,
// right after the call joined the queue (the layers before it read only
// Err and Deadline), so the hook runs once the call is queued, on the
// caller's goroutine, before the wait looks at anything.
type atk27dCtx struct {
	context.Context
	once sync.Once
	hook func()
}

func (c *atk27dCtx) Done() <-chan struct{} {
	c.once.Do(c.hook)
	return c.Context.Done()
}

// atk27dClient is the inventory client with only the rate limit p, the
// service's, on its methods, GetStock made of one attempt with a long
// timeout.
func atk27dClient(t *testing.T, cc grpc.ClientConnInterface, p policy.RateLimit) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(s *policy.Service) {
		s.Breaker, s.Bulkhead, s.AdaptiveLimit, s.ClientThrottle = nil, nil, nil, nil
		s.RateLimit = &p
		m := atkMethod(s, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout, m.Hedging = nil, 10*time.Second, 0, nil
	})
}

var atk27dApple = &inventoryv1.GetStockRequest{Sku: "apple"}

// TestAttack27DATokenGivenAsTheContextEndsGoesBack: README, Order of the
// layers: "A context that ends while the call waits for a token or a
// permit ends the wait the same way (the token is given back; ...)". 16
// clients, each with a bucket of 1 at 5/s that lets a call wait 1 s. On
// each, a first call takes the token, and a second waits for the next,
// due 200 ms later; its caller's context ends at 250 ms, after the token
// was handed to it and before the call looked (the hook of its Done
// channel holds the caller until then): its call never reaches the
// server, so its token must go back to the bucket. A third call, right
// after, with 50 ms to its deadline, then finds that token; were it spent,
// the next token would be about 150 ms away and the call refused.
func TestAttack27DATokenGivenAsTheContextEndsGoesBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	const clients = 16
	var lost, cancelled, other atomic.Int32
	var why sync.Map
	var wg sync.WaitGroup
	for i := range clients {
		c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: 5, Burst: 1, MaxWait: time.Second})
		wg.Go(func() {
			if _, err := c.GetStock(context.Background(), atk27dApple); err != nil {
				other.Add(1)
				why.Store(i, fmt.Sprint("first call: ", err))
				return
			}
			first := time.Now()
			base, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx := &atk27dCtx{Context: base, hook: func() {
				time.Sleep(time.Until(first.Add(250 * time.Millisecond)))
				cancel()
			}}
			if _, err := c.GetStock(ctx, atk27dApple); status.Code(err) == codes.Canceled {
				cancelled.Add(1)
			} else {
				other.Add(1)
				why.Store(i, fmt.Sprint("second call: ", err))
				return
			}
			tctx, tcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer tcancel()
			switch _, err := c.GetStock(tctx, atk27dApple); {
			case err == nil:
			case errors.Is(err, runtime.ErrRateLimited):
				lost.Add(1)
				why.Store(i, fmt.Sprint("third call: ", err))
			default:
				other.Add(1)
				why.Store(i, fmt.Sprint("third call: ", err))
			}
		})
	}
	wg.Wait()
	why.Range(func(k, v any) bool { t.Logf("client %v (one of them): %v", k, v); return false })
	if n := other.Load(); n != 0 {
		t.Fatalf("%d clients saw another answer than expected", n)
	}
	if sent, want := fs.Calls(atkGetStock), 2*clients-int(lost.Load()); sent != want {
		t.Errorf("the server saw %d calls, want %d (each client's first and third, none of the cancelled)", sent, want)
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("README, Order of the layers: a context that ends while the call waits for a token gives the token back; "+
			"of %d calls whose context ended as they were handed their token (none reached the server), %d spent it: "+
			"the next call, with 50 ms to its deadline, was refused, its token about 150 ms away", cancelled.Load(), n)
	}
}

// TestAttack27DTheQueueIsServedInOrderAsCallersLeaveIt: README, Rate
// limit: a call "joins a queue served in the order calls came", and "a
// caller that gives up waiting ... gives its place to those behind it".
// A bucket of 1 at 30/s (a token every 33.3 ms, a period no float64 holds
// exactly) that lets a call wait 2 s. A first call takes the token; then
// 12 callers join the queue one after the other, each started once the
// one before is queued (its Done hook says so); every third leaves after
// a random 0 to 150 ms. The server records the order the calls reach it.
// Those who stay are all served, in the order they came (an inversion is
// counted only when the later one reached the server 20 ms before the
// earlier, more than two calls handed their tokens by one late timer
// could race by), the m-th of them not before m token periods after the
// first call began (no token early), and each within its MaxWait.
func TestAttack27DTheQueueIsServedInOrderAsCallersLeaveIt(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	type arrival struct {
		n  int
		at time.Time
	}
	var seen []arrival
	fs, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		at := time.Now()
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-atk27d-order"); len(v) == 1 {
			n, _ := strconv.Atoi(v[0])
			mu.Lock()
			seen = append(seen, arrival{n, at})
			mu.Unlock()
		}
		return nil
	})
	readyConn(t, cc)
	const rate, maxWait, callers = 30.0, 2 * time.Second, 12
	c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: rate, Burst: 1, MaxWait: maxWait})
	begin := time.Now()
	if _, err := c.GetStock(context.Background(), atk27dApple); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		err  error
		took time.Duration
	}
	results := make([]outcome, callers+1)
	var wg sync.WaitGroup
	for i := 1; i <= callers; i++ {
		queued := make(chan struct{})
		base, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-atk27d-order", strconv.Itoa(i)))
		leaver := i%3 == 0
		ctx := &atk27dCtx{Context: base, hook: func() {
			if leaver {
				time.AfterFunc(time.Duration(rand.IntN(150))*time.Millisecond, cancel)
			}
			close(queued)
		}}
		wg.Go(func() {
			defer cancel()
			start := time.Now()
			_, err := c.GetStock(ctx, atk27dApple)
			results[i] = outcome{err, time.Since(start)}
		})
		select {
		case <-queued:
		case <-time.After(5 * time.Second):
			t.Fatalf("caller %d never waited for a token", i)
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	reached := map[int]bool{}
	for _, a := range seen {
		reached[a.n] = true
	}
	for i := 1; i <= callers; i++ {
		r := results[i]
		switch leaver := i%3 == 0; {
		case r.err == nil && !reached[i]:
			t.Errorf("caller %d succeeded but the server never saw it", i)
		case r.err != nil && (!leaver || status.Code(r.err) != codes.Canceled):
			t.Errorf("caller %d (leaves: %v): %v after %v, want served (a stayer) or CANCELLED (a leaver)", i, leaver, r.err, r.took)
		case r.took > maxWait+500*time.Millisecond:
			t.Errorf("caller %d waited %v, beyond its max wait of %v", i, r.took, maxWait)
		}
	}
	for m, a := range seen {
		if early := begin.Add(time.Duration(float64(m+1) / rate * float64(time.Second))); a.at.Before(early) {
			t.Errorf("call %d, the %d-th after the first, reached the server %v after the first began: before %d tokens could come at %g/s",
				a.n, m+1, a.at.Sub(begin), m+1, rate)
		}
		for _, b := range seen[m+1:] {
			if b.n < a.n && a.at.Sub(b.at) < -20*time.Millisecond {
				t.Errorf("caller %d, queued before caller %d, reached the server %v after it: the queue is served out of order (arrivals %v)",
					b.n, a.n, b.at.Sub(a.at), seen)
			}
		}
	}
	if got := fs.Calls(atkGetStock); got != len(seen)+1 {
		t.Errorf("the server saw %d calls, recorded %d + the first", got, len(seen))
	}
}

// TestAttack27DEveryCallWaitsNoLongerThanItWasPromised: README, Rate
// limit: a call waits "if its turn comes within max_wait and before the
// call's deadline (counting a token for each call queued before it);
// otherwise it is refused at once, with RESOURCE_EXHAUSTED matching
// runtime.ErrRateLimited and saying when a token comes". 32 callers call
// in a loop for 500 ms against a bucket of 2 at 50/s that lets a call
// wait 150 ms, each call with a random 10 to 300 ms to its deadline. Every
// call that went waited no longer than the max wait; every refusal came at
// once, as ErrRateLimited with RESOURCE_EXHAUSTED, its RetryAfter beyond
// the max wait or beyond what was left of its deadline when it was
// refused; a call that ran out of time (its token due before its
// deadline, the rest too short for the call, or a loaded machine woke it
// late) ended at its deadline; and the server saw no more than the bucket
// and its rate allow. A refused caller pauses 1 to 10 ms before its next
// call.
func TestAttack27DEveryCallWaitsNoLongerThanItWasPromised(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	const maxWait, slack = 150 * time.Millisecond, 150 * time.Millisecond
	c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: 50, Burst: 2, MaxWait: maxWait})
	var ok, refused, late atomic.Int32
	var mu sync.Mutex
	var broken []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(broken) < 8 {
			broken = append(broken, fmt.Sprintf(format, args...))
		}
	}
	took := atkStorm(32, 500*time.Millisecond, func() {
		timeout := time.Duration(10+rand.IntN(290)) * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		dl, _ := ctx.Deadline()
		start := time.Now()
		_, err := c.GetStock(ctx, atk27dApple)
		end := time.Now()
		cancel()
		took := end.Sub(start)
		var re *runtime.Error
		switch {
		case err == nil:
			ok.Add(1)
			if took > maxWait+slack {
				fail("a call that went took %v, its wait bounded by the max wait %v", took, maxWait)
			}
		case errors.Is(err, runtime.ErrRateLimited):
			refused.Add(1)
			switch {
			case status.Code(err) != codes.ResourceExhausted || !errors.As(err, &re):
				fail("a refusal: %v (%v), want RESOURCE_EXHAUSTED and a *runtime.Error", err, status.Code(err))
			case took > slack:
				fail("a refusal came after %v, want at once", took)
			case re.RetryAfter <= maxWait && re.RetryAfter < dl.Sub(end):
				fail("a refusal says a token in %v, within the max wait %v and the %v left to the deadline: the call could have waited (%v)",
					re.RetryAfter, maxWait, dl.Sub(end), err)
			}
			// A refused caller pauses, as one would, rather than
			// spin on the bucket's lock with 31 others.
			time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
		case status.Code(err) == codes.DeadlineExceeded:
			late.Add(1)
			if end.Sub(dl) > slack {
				fail("a call that ran out of time ended %v after its deadline (%v)", end.Sub(dl), err)
			}
		default:
			fail("a call failed otherwise: %v", err)
		}
	})
	for _, b := range broken {
		t.Error(b)
	}
	sent, most := fs.Calls(atkGetStock), 2+int(took.Seconds()*50)+1
	t.Logf("in %v: %d went, %d refused, %d ran out of time waiting; the server saw %d", took, ok.Load(), refused.Load(), late.Load(), sent)
	// A call whose token came just before its deadline may reach the
	// server and still run out of time there.
	if sent > most || sent < int(ok.Load()) || sent > int(ok.Load()+late.Load()) {
		t.Errorf("the server saw %d calls (%d went) in %v, a bucket of 2 at 50/s allows %d", sent, ok.Load(), took, most)
	}
	if sent < most/2 {
		t.Errorf("the server saw %d calls in %v, want at least half the %d allowed", sent, took, most)
	}
}

// TestAttack27DASharedCallLeftByItsCallersGivesItsPlaceInTheQueue: README,
// Cache: "When the last caller waiting for a shared call leaves, the call
// starts nothing more: if it is waiting for a rate-limit token ... it ends
// there", and Rate limit: a caller that gives up "gives its place to those
// behind it". GetStock cached, a bucket of 1 at 5/s that lets a call wait
// 1 s. apple takes the token; pear's shared call queues for the next (due
// at 200 ms) and its only caller cancels at 50 ms; plum, asked for at
// about 70 ms with its deadline at 300 ms, must have the token at 200 ms:
// had pear's shared call kept its place, plum's would come at 400 ms.
func TestAttack27DASharedCallLeftByItsCallersGivesItsPlaceInTheQueue(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 5, Burst: 1, MaxWait: time.Second}
			m := atkMethod(p, atkGetStock)
			m.Retry, m.Hedging, m.Timeout, m.OverallTimeout = nil, nil, 2*time.Second, 0
			m.Cache.FreshTTL, m.Cache.StaleTTL = time.Hour, time.Hour
		})}})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	time.AfterFunc(time.Until(begin.Add(50*time.Millisecond)), pcancel)
	if _, err := c.GetStock(pctx, &inventoryv1.GetStockRequest{Sku: "pear"}); status.Code(err) != codes.Canceled {
		t.Fatalf("pear, cancelled at 50 ms while its shared call waits for a token: %v, want CANCELLED", err)
	}
	time.Sleep(time.Until(begin.Add(70 * time.Millisecond))) // the shared call sees its callers gone
	ctx, cancel := context.WithDeadline(context.Background(), begin.Add(300*time.Millisecond))
	defer cancel()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "plum"}); err != nil {
		t.Errorf("plum, queued at %v with its deadline at 300 ms: %v after %v; the next token, due at 200 ms, "+
			"was kept by pear's shared call, whose callers had all left", 70*time.Millisecond, err, time.Since(begin))
	}
	if got := fs.Calls(atkGetStock); got != 2 {
		t.Errorf("the server saw %d calls, want apple's and plum's", got)
	}
}

// TestAttack27DABucketOfOneKeepsItsRateUnderAQueue: README, Rate limit:
// "burst tokens, refilled at requests_per_second", a call waiting its
// turn "counting a token for each call queued before it". 16 callers
// call in a loop for 500 ms against a bucket of 1 at 1000/s that lets a
// call wait 1 s: the queue is never empty, so every token the bucket
// refills is some waiter's, and the server should see about 1 + 1000/s ×
// the time (at least 85% of it; a bucket of 2 gets 98%). When a late
// timer's refill is capped at the burst before the queue is served, the
// time each run of the timer was late is lost: a bucket of 1 has no room
// for it, and the server saw 58 to 74% of the rate (307 to 386 calls in
// 520 to 530 ms, -race or not), each waiter waiting up to twice what it
// was told.
func TestAttack27DABucketOfOneKeepsItsRateUnderAQueue(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	const rate = 1000
	c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: rate, Burst: 1, MaxWait: time.Second})
	var wg sync.WaitGroup
	var failed atomic.Int32
	stop := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.GetStock(context.Background(), atk27dApple); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	begin := time.Now()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	took := time.Since(begin)
	sent, allowed := fs.Calls(atkGetStock), 1+int(took.Seconds()*rate)
	t.Logf("the server saw %d calls in %v, %d allowed", sent, took, allowed)
	if n := failed.Load(); n != 0 {
		t.Errorf("%d calls failed", n)
	}
	if sent > allowed+1 {
		t.Errorf("the server saw %d calls in %v, more than the %d a bucket of 1 at %d/s allows", sent, took, allowed, rate)
	}
	if sent < allowed*85/100 {
		t.Errorf("the server saw %d calls in %v from a queue never empty, %d%% of the %d a bucket of 1 at %d/s refills: "+
			"the tokens that came while its timer was late went to nobody", sent, took, 100*sent/allowed, allowed, rate)
	}
}

// atk27dLateCtx is a context whose deadline has passed and whose timer has
// not run (Err nil, Done open), as on a loaded machine before the
// context's goroutine is scheduled (see atk26aPastDeadline); hook runs
// the first time the runtime asks for Done, in the rate limit's wait.
type atk27dLateCtx struct {
	context.Context
	dl   time.Time
	once sync.Once
	hook func()
	done chan struct{}
}

func (c *atk27dLateCtx) Deadline() (time.Time, bool) { return c.dl, true }
func (c *atk27dLateCtx) Err() error                  { return nil }
func (c *atk27dLateCtx) Done() <-chan struct{} {
	c.once.Do(c.hook)
	return c.done
}

// TestAttack27DATokenGivenPastTheDeadlineGoesBack: README, Order of the
// layers: a call whose deadline passed, "also before the context's timer
// has run and while its Err is still nil, as gRPC reads the deadline
// itself", takes no token, and "a context that ends while the call waits
// for a token ... ends the wait the same way (the token is given back".
// A bucket of 1 at 5/s that lets a call wait 1 s: a first call takes the
// token; a second, its deadline at 300 ms, waits for the next (due at
// 200 ms) and is handed it only at 320 ms (its caller held until then),
// its deadline passed and its timer not run. gRPC refuses to send it; its
// token must go back: a third call, right after, with 50 ms to its
// deadline, finds it (spent, the next would be 80 ms away).
func TestAttack27DATokenGivenPastTheDeadlineGoesBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: 5, Burst: 1, MaxWait: time.Second})
	if _, err := c.GetStock(context.Background(), atk27dApple); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	ctx := &atk27dLateCtx{Context: context.Background(), dl: first.Add(300 * time.Millisecond), done: make(chan struct{}),
		hook: func() { time.Sleep(time.Until(first.Add(320 * time.Millisecond))) }}
	if _, err := c.GetStock(ctx, atk27dApple); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the second call, handed its token past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	tctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.GetStock(tctx, atk27dApple); err != nil {
		t.Errorf("README, Order of the layers: a call past its deadline takes no token; the second call, handed its token "+
			"past its deadline (its timer not yet run), sent nothing and spent it: the third call got %v", err)
	}
	if got := fs.Calls(atkGetStock); got != 2 {
		t.Errorf("the server saw %d calls, want the first and the third", got)
	}
}
