package server

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// silentWithTimeout opens n gRPC requests to method over one cleartext
// HTTP/2 connection, each sending its headers with grpc-timeout timeout
// and never its message; stop ends them.
func silentWithTimeout(t *testing.T, addr, method, timeout string, n int) (stop func()) {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pipes []*io.PipeWriter
	for range n {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, pr)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/grpc")
		hr.Header.Set("Te", "trailers")
		hr.Header.Set("Grpc-Timeout", timeout)
		wg.Go(func() {
			if resp, err := tr.RoundTrip(hr); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			for _, pw := range pipes {
				pw.Close()
			}
			wg.Wait()
			tr.CloseIdleConnections()
		})
	}
}

// TestAttack24cHostileTimeouts: grpc-timeout values a hostile or broken
// caller sends, by hand (grpc-go never sends them). Already over on
// arrival (0n, 1n, 0H): refused DEADLINE_EXCEEDED in the tap, marked
// DEADLINE_TOO_SHORT and do-not-retry, counted, no place held, the
// handler not run. The longest gRPC can read (99999999H, which it clamps
// to 292 years): served. Malformed (9 digits, a unit it does not know, a
// sign, a space): gRPC's own INTERNAL before the Guard, which counts
// nothing.
func TestAttack24cHostileTimeouts(t *testing.T) {
	srv := &inventoryServer{}
	g, _, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for _, tc := range []struct {
		timeout string
		want    codes.Code
		refused uint64 // DeadlineRefused after it
		calls   int64  // handler calls after it
	}{
		{"0n", codes.DeadlineExceeded, 1, 0},
		{"1n", codes.DeadlineExceeded, 2, 0},
		{"0H", codes.DeadlineExceeded, 3, 0},
		{"99999999H", codes.OK, 3, 1},
		{"999999999H", codes.Internal, 3, 1},
		{"1x", codes.Internal, 3, 1},
		{"-1S", codes.Internal, 3, 1},
		{"+5S", codes.Internal, 3, 1},
		{" 5S", codes.Internal, 3, 1},
		{"5", codes.Internal, 3, 1},
	} {
		_, c, msg := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{Sku: "a"}, time.Second, http.Header{"Grpc-Timeout": {tc.timeout}})
		if c != tc.want {
			t.Errorf("grpc-timeout %q: %s %q; want %s", tc.timeout, c, msg, tc.want)
		}
		if s, n := stats(t, g), srv.getCalls.Load(); s.DeadlineRefused != tc.refused || n != tc.calls || s.InFlight != 0 {
			t.Errorf("after grpc-timeout %q: %d refused as dead, %d handler calls, %d in flight; want %d, %d, 0",
				tc.timeout, s.DeadlineRefused, n, s.InFlight, tc.refused, tc.calls)
		}
	}
	// The refusal a grpc-go caller gets for a deadline over on arrival
	// carries both marks.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	client := inventoryv1.NewInventoryServiceClient(cc)
	if _, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a deadline already passed: %v", err)
	}
}

// TestAttack24cHostileKeys: idempotency keys a hostile caller sends. Keys
// are compared byte for byte: "0", "00", " 0" and "0 " are four keys,
// each run once and replayed to its own repeat (gRPC passes a value's
// spaces on as sent), bytes outside UTF-8 and outside ASCII included
// (sent by hand; the store key is bytes); an empty value is no key (run
// every time); the header sent twice, even once empty, is refused
// INVALID_ARGUMENT; a key of MaxKeyLength bytes is kept, one byte more
// refused INVALID_ARGUMENT; the handler never runs for a refusal.
func TestAttack24cHostileKeys(t *testing.T) {
	srv := &inventoryServer{}
	g, client, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	keys := []string{"0", "00", " 0", "0 ", "\xff\xfe", "é", "\xff\xff", stringOf('k', MaxKeyLength)}
	for round := range 2 {
		for i, k := range keys {
			req := &inventoryv1.ReserveStockRequest{OrderId: "o" + itoa(int64(i)), Sku: "a", Units: 1}
			msg, c, text := rawCall(t, cc.Target(), reserveStock, req, time.Second, http.Header{"Idempotency-Key": {k}})
			if c != codes.OK {
				t.Fatalf("round %d, key %q: %s %q; want an answer", round, k, c, text)
			}
			var resp inventoryv1.ReserveStockResponse
			if err := proto.Unmarshal(msg, &resp); err != nil {
				t.Fatal(err)
			}
			if want := "r-o" + itoa(int64(i)) + "-" + itoa(int64(i+1)); resp.GetReservationId() != want {
				t.Errorf("round %d, key %q: %q; want %q (its own first run's)", round, k, resp.GetReservationId(), want)
			}
		}
	}
	if n, s := srv.reserveCalls.Load(), stats(t, g); n != int64(len(keys)) || s.Replayed != uint64(len(keys)) || s.Mismatched != 0 {
		t.Errorf("the handler ran %d times, %d replays, %d mismatched; want %d, %d, 0", n, s.Replayed, s.Mismatched, len(keys), len(keys))
	}
	calls := srv.reserveCalls.Load()
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-refused", Sku: "a", Units: 1}
	for _, md := range []metadata.MD{
		metadata.Pairs(runtime.IdempotencyKeyHeader, "", runtime.IdempotencyKeyHeader, "k"),
		metadata.Pairs(runtime.IdempotencyKeyHeader, "k", runtime.IdempotencyKeyHeader, "k"),
		metadata.Pairs(runtime.IdempotencyKeyHeader, stringOf('k', MaxKeyLength+1)),
	} {
		if _, err := client.ReserveStock(metadata.NewOutgoingContext(ctxTimeout(t, time.Second), md), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("key header %v: %v; want INVALID_ARGUMENT", md, err)
		}
	}
	if n := srv.reserveCalls.Load(); n != calls {
		t.Errorf("the handler ran %d times for the refused requests, want 0", n-calls)
	}
	for range 2 {
		if _, err := client.ReserveStock(metadata.NewOutgoingContext(ctxTimeout(t, time.Second), metadata.Pairs(runtime.IdempotencyKeyHeader, "")), req); err != nil {
			t.Fatalf("an empty key: %v", err)
		}
	}
	if n := srv.reserveCalls.Load(); n != calls+2 {
		t.Errorf("an empty key sent twice ran the handler %d times, want 2 (no key)", n-calls)
	}
	eventually(t, "no place held", func() bool { return stats(t, g).InFlight == 0 })
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// TestAttack24cHostilePriorities: resilient-priority values a hostile
// caller sends, by hand. None raises a request: GetStock (annotated high)
// sent "critical" is admitted high; a value the Guard does not know
// (upper case, a number, one past uint64, a sign, bytes outside UTF-8,
// empty) is ignored, high; several values, the lowest known one ("low"
// among "critical", "LOW", "low").
func TestAttack24cHostilePriorities(t *testing.T) {
	srv := &inventoryServer{}
	g, _, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for _, tc := range []struct {
		values []string
		want   Priority
	}{
		{[]string{"critical"}, PriorityHigh},
		{[]string{"LOW"}, PriorityHigh},
		{[]string{"1"}, PriorityHigh},
		{[]string{"18446744073709551616"}, PriorityHigh},
		{[]string{"-1"}, PriorityHigh},
		{[]string{"low\xff"}, PriorityHigh},
		{[]string{""}, PriorityHigh},
		{[]string{"critical", "LOW", "low"}, PriorityLow},
		{[]string{"normal"}, PriorityNormal},
	} {
		before := stats(t, g).Admitted
		_, c, msg := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{Sku: "a"}, time.Second, http.Header{"Resilient-Priority": tc.values})
		if c != codes.OK {
			t.Fatalf("priority %q: %s %q", tc.values, c, msg)
		}
		after := stats(t, g).Admitted
		if after[tc.want] != before[tc.want]+1 {
			t.Errorf("priority %q: admitted %v → %v; want one more %s", tc.values, before, after, tc.want)
		}
	}
}

// TestAttack24cLongDeadlineHoldsItsPlacePastTheDefaultTimeout: "a caller
// that opens requests without a deadline and sends only their headers
// fills the limit ... The method's DefaultTimeout ends them". It bounds
// only a request that sent no deadline: one that sends grpc-timeout
// 99999999H (292 years, the longest gRPC reads) and never its message
// holds its place past the DefaultTimeout, until its stream ends (this
// test asserts that limit). The server's bound on such callers is the
// connection's: keepalive's MaxConnectionAge and MaxConnectionAgeGrace
// close the connection, which ends its streams and gives their places
// back.
func TestAttack24cLongDeadlineHoldsItsPlacePastTheDefaultTimeout(t *testing.T) {
	const defaultTimeout = 200 * time.Millisecond
	for _, age := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run("MaxConnectionAge "+age.String(), func(t *testing.T) {
			p := inventoryPolicy()
			p.Methods[0].DefaultTimeout = defaultTimeout
			g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			opts := g.ServerOptions()
			if age > 0 {
				opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: age, MaxConnectionAgeGrace: age}))
			}
			addr := serve(t, &inventoryServer{}, opts...)
			stop := silentWithTimeout(t, addr, getStock, "99999999H", 6)
			defer stop()
			eventually(t, "6 silent requests admitted", func() bool { return stats(t, g).InFlight == 6 })
			if age == 0 {
				start := time.Now()
				time.Sleep(3 * defaultTimeout)
				if n := stats(t, g).InFlight; n != 6 {
					t.Errorf("%d places held %s after they came, past the DefaultTimeout %s; this limit says 6", n, time.Since(start), defaultTimeout)
				}
				stop()
			}
			// Under MaxConnectionAge: within its 110 % and the grace, and
			// the 2 s eventually allows.
			eventually(t, "their places came back", func() bool { return stats(t, g).InFlight == 0 })
		})
	}
}
