package runtime_test

// Attacks on README, "Generated idempotency keys": "generate_idempotency_key:
// true makes the client send a random 128-bit key (crypto/rand, 26
// characters) as idempotency-key on every attempt and hedged copy of one
// call"; "the key is born inside the call, so a caller that repeats the
// call ... sends a new key"; with the cache's shared call (README,
// "Cache"), which is one call for all the callers it serves.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29bSeen records, for each call the server saw, the caller's x-call
// header and the idempotency-key values it carried.
type atk29bSeen struct {
	mu    sync.Mutex
	calls []atk29bCall
}

type atk29bCall struct {
	id   string
	keys []string
}

func (s *atk29bSeen) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	id := strings.Join(md.Get("x-call"), ",")
	s.mu.Lock()
	s.calls = append(s.calls, atk29bCall{id: id, keys: md.Get(runtime.IdempotencyKeyHeader)})
	s.mu.Unlock()
}

func (s *atk29bSeen) all() []atk29bCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]atk29bCall(nil), s.calls...)
}

// atk29bKeyOK reports whether k is a key as the runtime generates it: 26
// characters of the base32 alphabet crypto/rand.Text draws from.
func atk29bKeyOK(k string) bool {
	if len(k) != 26 {
		return false
	}
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}

// atk29bGetStock binds GetStock, idempotent with a generated key, under m
// (its name, kind and keys filled in here), the cache's key its sku.
func atk29bGetStock(t *testing.T, cc inventoryv1.InventoryServiceClient, m policy.Method, opts ...runtime.Option) *runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse] {
	t.Helper()
	m.Name, m.Kind, m.Idempotent, m.GenerateIdempotencyKey = atkGetStock, policy.KindUnary, true, true
	rt, err := runtime.NewClient(&policy.Service{Name: attack20bDep, Budget: &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute},
		Methods: []policy.Method{m}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hooks := runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{}
	if m.Cache != nil {
		hooks.CacheKey = func(r *inventoryv1.GetStockRequest) string { return r.GetSku() }
	}
	h, err := runtime.NewUnary(rt, atkGetStock, cc.GetStock, hooks)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestAttack29BGeneratedKeyIsOnePerCallUnderConcurrency: 16 callers at
// once, each making 2 calls of GetStock with a generated key, retried (3
// attempts; the server fails the first two of each call UNAVAILABLE) or
// hedged (3 copies 5 ms apart; the server holds the first two of each
// call until the third has come). Every attempt or copy of one call
// carries exactly one key, the same, of 26 base32 characters; no two
// calls, of one caller or of two, share a key.
func TestAttack29BGeneratedKeyIsOnePerCallUnderConcurrency(t *testing.T) {
	atkNoLeak(t)
	for _, mode := range []string{"retried", "hedged"} {
		t.Run(mode, func(t *testing.T) {
			seen := &atk29bSeen{}
			var mu sync.Mutex
			per := map[string]int{}             // attempts or copies seen per call
			third := map[string]chan struct{}{} // closed when a call's third copy came
			gate := func(id string) chan struct{} {
				if third[id] == nil {
					third[id] = make(chan struct{})
				}
				return third[id]
			}
			_, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
				seen.record(ctx)
				md, _ := metadata.FromIncomingContext(ctx)
				id := strings.Join(md.Get("x-call"), ",")
				mu.Lock()
				per[id]++
				n, g := per[id], gate(id)
				if n == 3 {
					close(g)
				}
				mu.Unlock()
				if n >= 3 {
					return nil
				}
				if mode == "retried" {
					return status.Error(codes.Unavailable, "injected")
				}
				select { // a hedged copy held until the call's third has come
				case <-g:
					return status.Error(codes.Unavailable, "held copy")
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				}
			})
			readyConn(t, cc)
			m := policy.Method{Timeout: 2 * time.Second}
			if mode == "retried" {
				m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
					Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
			} else {
				m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
			}
			h := atk29bGetStock(t, inventoryv1.NewInventoryServiceClient(cc), m)
			const callers, calls = 16, 2
			var wg sync.WaitGroup
			errs := make(chan error, callers*calls)
			for i := range callers {
				wg.Go(func() {
					for j := range calls {
						ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
						ctx = metadata.AppendToOutgoingContext(ctx, "x-call", fmt.Sprintf("%d-%d", i, j))
						if _, err := h.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
							errs <- fmt.Errorf("call %d-%d: %w", i, j, err)
						}
						cancel()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			keyOf := map[string]string{}  // call → its key
			callOf := map[string]string{} // key → its call
			attempts := map[string]int{}
			for _, c := range seen.all() {
				attempts[c.id]++
				if len(c.keys) != 1 || !atk29bKeyOK(c.keys[0]) {
					t.Errorf("call %s: an attempt carried idempotency-key %q, want one generated key of 26 base32 characters", c.id, c.keys)
					continue
				}
				k := c.keys[0]
				if prev, ok := keyOf[c.id]; ok && prev != k {
					t.Errorf("call %s: attempts carried keys %q and %q, want one key for every attempt and copy of the call", c.id, prev, k)
				}
				keyOf[c.id] = k
				if other, ok := callOf[k]; ok && other != c.id {
					t.Errorf("calls %s and %s both carried key %q: a key is born inside each call", other, c.id, k)
				}
				callOf[k] = c.id
			}
			if len(keyOf) != callers*calls {
				t.Errorf("the server saw %d calls' keys, want %d", len(keyOf), callers*calls)
			}
			for id, n := range attempts {
				if n != 3 {
					t.Errorf("call %s: the server saw %d attempts or copies, want 3", id, n)
				}
			}
		})
	}
}

// TestAttack29BGeneratedKeyOfACachesSharedCall: GetStock cached (fresh
// 1 s on a clock of the test's), with a generated key, retried (3
// attempts; the server fails the first two of each shared call
// UNAVAILABLE and holds each attempt until 8 callers joined). 8 callers
// of apple share one call: the server sees its 3 attempts, each with one
// key, the same; all 8 get the answer. Once the answer is no longer
// fresh, the next apple is another call, with another key.
func TestAttack29BGeneratedKeyOfACachesSharedCall(t *testing.T) {
	atkNoLeak(t)
	seen := &atk29bSeen{}
	joined := make(chan struct{})
	var mu sync.Mutex
	n := 0
	_, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		seen.record(ctx)
		select {
		case <-joined:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		mu.Lock()
		n++
		fail := n%3 != 0 // each shared call: two failures, then the answer
		mu.Unlock()
		if fail {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	})
	readyConn(t, cc)
	clk := newAtkClock()
	h := atk29bGetStock(t, inventoryv1.NewInventoryServiceClient(cc), policy.Method{
		Timeout: 2 * time.Second,
		Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
			Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)},
		Cache: &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10, KeyFields: []string{"sku"}},
	}, runtime.WithClock(clk))

	const callers = 8
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(callers)
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			started.Done()
			if resp, err := h.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil || resp.GetSku() != "apple" {
				errs <- fmt.Errorf("a caller of the shared call: %v, %v", resp, err)
			}
		})
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond) // the callers join the one shared call
	close(joined)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	first := seen.all()
	if len(first) != 3 {
		t.Fatalf("the server saw %d attempts for %d callers of one shared call, want 3 (calls: %v)", len(first), callers, first)
	}
	for i, c := range first {
		if len(c.keys) != 1 || !atk29bKeyOK(c.keys[0]) || c.keys[0] != first[0].keys[0] {
			t.Errorf("attempt %d of the shared call carried %q, want the one generated key %q", i+1, c.keys, first[0].keys)
		}
	}

	clk.Advance(2 * time.Second) // apple is no longer fresh: the next caller makes a call
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := h.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("apple once it is no longer fresh: %v", err)
	}
	next := seen.all()[len(first):]
	if len(next) != 3 {
		t.Fatalf("the server saw %d attempts of the next call, want 3", len(next))
	}
	for i, c := range next {
		if len(c.keys) != 1 || c.keys[0] != next[0].keys[0] || c.keys[0] == first[0].keys[0] {
			t.Errorf("attempt %d of the next call carried %q, want one key of its own (the first call's was %q)", i+1, c.keys, first[0].keys)
		}
	}
}
