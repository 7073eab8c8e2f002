package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	grpcstats "google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackPanicInDedupHandler: the first request with a key panics
// (recovered by an interceptor outside the Guard) while a repeat waits for
// it. The key is freed, not left pending: the waiter takes it over and
// runs, its answer is kept, and a later repeat gets that answer; every
// place in flight is given back.
func TestAttackPanicInDedupHandler(t *testing.T) {
	srv := &inventoryServer{}
	started := make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() == 1 {
			close(started)
			time.Sleep(100 * time.Millisecond)
			panic("reserve boom")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "after-panic"}, nil
	}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "p-1")
		first <- err
	}()
	<-started
	resp, err := reserve(t, client, "p-1")
	if err != nil || resp.GetReservationId() != "after-panic" {
		t.Errorf("waiter of a request that panicked: %v %v, want it to take over and run", resp, err)
	}
	if err := <-first; status.Code(err) != codes.Internal {
		t.Errorf("the panicking request: %v, want the recovered INTERNAL", err)
	}
	again, err := reserve(t, client, "p-1")
	if err != nil || again.GetReservationId() != "after-panic" {
		t.Errorf("later repeat: %v %v, want the kept answer", again, err)
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (the panic, the take-over)", n)
	}
	if s := stats(t, g); s.InFlight != 0 || s.Waited != 1 || s.Replayed != 1 {
		t.Errorf("stats %+v: want no place held, one wait, one replay", s)
	}
}

// TestAttackWaiterCancelled: a repeat whose caller cancels while it waits
// for the first gets CANCELLED at once, gives its place back, and changes
// nothing for the first: it runs once, and a later repeat gets its answer.
func TestAttackWaiterCancelled(t *testing.T) {
	srv := &inventoryServer{}
	started := make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return &inventoryv1.ReserveStockResponse{ReservationId: "first"}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "c-1")
		first <- err
	}()
	<-started
	ctx, cancel := context.WithCancel(withKey(context.Background(), "c-1"))
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "c-1", Sku: "a", Units: 1})
	if status.Code(err) != codes.Canceled || time.Since(start) > 200*time.Millisecond {
		t.Errorf("cancelled waiter: %v after %s, want CANCELLED at once", err, time.Since(start))
	}
	eventually(t, "the waiter's place given back", func() bool { return stats(t, g).InFlight == 1 })
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	again, err := reserve(t, client, "c-1")
	if err != nil || again.GetReservationId() != "first" {
		t.Errorf("later repeat: %v %v, want the first's answer", again, err)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	eventually(t, "every place given back", func() bool { return stats(t, g).InFlight == 0 })
}

// rawCodec sends and receives messages as the bytes given, so that a test
// chooses the exact serialization on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

// structService is a service whose one method takes and returns a
// google.protobuf.Struct: a request type with a map.
const structMethod = "/attack.StructService/Do"

func serveStructService(t *testing.T, runs *atomic.Int64, opts ...Option) *grpc.ClientConn {
	t.Helper()
	p := &policy.Server{Name: "attack.StructService", Methods: []policy.ServerMethod{{
		Name: structMethod, Dedup: &policy.Dedup{TTL: time.Minute, Lease: 300 * time.Millisecond},
		NewResponse: func() proto.Message { return new(structpb.Struct) }}}}
	g, err := NewGuard([]*policy.Server{p}, append([]Option{WithStore(NewMemoryStore(10))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(srv any, ctx context.Context, dec func(any) error, icp grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			return structpb.NewStruct(map[string]any{"run": float64(runs.Add(1))})
		}
		return icp(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: structMethod}, h)
	}
	lis := serveDesc(t, &grpc.ServiceDesc{ServiceName: "attack.StructService", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: handler}}}, g.ServerOptions()...)
	return dial(t, lis)
}

func serveDesc(t *testing.T, desc *grpc.ServiceDesc, opts ...grpc.ServerOption) string {
	t.Helper()
	s := grpc.NewServer(opts...)
	s.RegisterService(desc, struct{}{})
	return serveGRPC(t, s)
}

// mapEntry is one entry of Struct.fields: key (1) and a Value (2) holding
// a string (3).
func mapEntry(k, v string) []byte {
	var val []byte
	val = protowire.AppendTag(val, 3, protowire.BytesType)
	val = protowire.AppendString(val, v)
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, k)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendBytes(e, val)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

// TestAttackFingerprintMapOrder: two serializations of one request that
// differ only in the order of its map entries are one request: the repeat
// is replayed, not refused as another body, and the handler runs once.
func TestAttackFingerprintMapOrder(t *testing.T) {
	var runs atomic.Int64
	cc := serveStructService(t, &runs)
	forward, backward := []byte{}, []byte{}
	for i := range 20 {
		forward = append(forward, mapEntry("k"+strconv.Itoa(i), "v")...)
		backward = append(mapEntry("k"+strconv.Itoa(i), "v"), backward...)
	}
	var a, b []byte
	if err := cc.Invoke(withKey(ctxTimeout(t, time.Second), "m-1"), structMethod, &forward, &a, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	err := cc.Invoke(withKey(ctxTimeout(t, time.Second), "m-1"), structMethod, &backward, &b, grpc.ForceCodec(rawCodec{}))
	if err != nil || string(a) != string(b) {
		t.Errorf("the same map in another order: %v, want the replay", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestAttackFingerprintUnknownFields: two serializations of a request with
// the same fields the server does not know, in another order (proto.Equal
// holds between them). The fingerprint orders every field by its number,
// known or not, so the second is the same request (a replica that knows
// the fields would compare them by value): replayed. Two values of one
// unknown field in another order are another request (a list is not a
// set). Fields the server knows are compared by value whatever their
// order on the wire.
func TestAttackFingerprintUnknownFields(t *testing.T) {
	srv := &inventoryServer{}
	_, _, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	known := func(order []int) []byte {
		var b []byte
		for _, f := range order {
			switch f {
			case 1:
				b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), "u-1")
			case 2:
				b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), "sku")
			case 3:
				b = protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), 2)
			case 98:
				b = protowire.AppendVarint(protowire.AppendTag(b, 98, protowire.VarintType), 7)
			case 99:
				b = protowire.AppendString(protowire.AppendTag(b, 99, protowire.BytesType), "x")
			case -99:
				b = protowire.AppendString(protowire.AppendTag(b, 99, protowire.BytesType), "y")
			}
		}
		return b
	}
	call := func(key string, body []byte) error {
		var out []byte
		return cc.Invoke(withKey(ctxTimeout(t, time.Second), key), reserveStock, &body, &out, grpc.ForceCodec(rawCodec{}))
	}
	// Known fields in any order: one request.
	if err := call("u-known", known([]int{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	if err := call("u-known", known([]int{3, 1, 2, 3})); err != nil {
		t.Errorf("the same known fields in another order: %v, want the replay", err)
	}
	a, b := known([]int{1, 2, 3, 98, 99}), known([]int{1, 2, 3, 99, 98})
	ma, mb := new(inventoryv1.ReserveStockRequest), new(inventoryv1.ReserveStockRequest)
	if proto.Unmarshal(a, ma) != nil || proto.Unmarshal(b, mb) != nil || !proto.Equal(ma, mb) {
		t.Fatal("the two serializations are not proto.Equal: the test is wrong")
	}
	if err := call("u-unknown", a); err != nil {
		t.Fatal(err)
	}
	if err := call("u-unknown", b); err != nil {
		t.Errorf("unknown fields in another order: %v, want the replay", err)
	}
	if err := call("u-list", known([]int{1, 2, 3, 99, -99})); err != nil {
		t.Fatal(err)
	}
	if err := call("u-list", known([]int{1, 2, 3, -99, 99})); status.Code(err) != codes.InvalidArgument {
		t.Errorf("two values of one unknown field in another order: %v, want INVALID_ARGUMENT", err)
	}
	if n := srv.reserveCalls.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3 (one per key)", n)
	}
}

// TestAttackManyKeysMemoryStore: far more distinct keys than a
// MemoryStore holds, through the server: it never holds more than its
// size, the most recent keys are still replayed, and making room costs
// the same on a store of 100 000 entries as on one of 1 000 (it used to
// walk the whole store, milliseconds under its lock, on every claim).
func TestAttackManyKeysMemoryStore(t *testing.T) {
	srv := &inventoryServer{}
	store := NewMemoryStore(50)
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
	for i := range 500 {
		if _, err := reserve(t, client, "many-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if n := store.Len(); n > 50 {
			t.Fatalf("store holds %d entries, its size is 50", n)
		}
	}
	if _, err := reserve(t, client, "many-499"); err != nil || srv.reserveCalls.Load() != 500 {
		t.Errorf("the latest key: %v after %d runs, want its replay after 500", err, srv.reserveCalls.Load())
	}

	// What making room costs is counted, not timed: the entries evict
	// looks at per claim on a full store, with 8 running requests at the
	// back (the oldest written), must be those 8 and the one it drops,
	// whatever the store's size.
	perClaim := func(n int) float64 {
		s := NewMemoryStore(n)
		ctx := context.Background()
		for i := range 8 { // a few running requests at the back
			_, _ = s.Claim(ctx, "run-"+strconv.Itoa(i), "t", Fingerprint{}, time.Hour)
		}
		for i := s.Len(); i < n; i++ {
			k := strconv.Itoa(i)
			_, _ = s.Claim(ctx, k, "t", Fingerprint{}, time.Minute)
			_ = s.Complete(ctx, k, "t", []byte("x"), time.Hour)
		}
		const claims = 2000
		s.mu.Lock()
		s.looked = 0
		s.mu.Unlock()
		for i := range claims {
			k := "new-" + strconv.Itoa(i)
			if c, err := s.Claim(ctx, k, "t", Fingerprint{}, time.Minute); err != nil || c.State != Claimed {
				t.Fatalf("claim on a full store: %+v %v", c, err)
			}
			_ = s.Complete(ctx, k, "t", []byte("x"), time.Hour)
		}
		if s.Len() != n {
			t.Fatalf("store of %d holds %d", n, s.Len())
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(s.looked) / claims
	}
	for _, n := range []int{1000, 100_000} {
		if looked := perClaim(n); looked > 9 {
			t.Errorf("a claim on a full store of %d entries looks at %.1f of them to make room, want at most 9 (the 8 running and the one dropped): making room walks the store", n, looked)
		}
	}
}

// TestAttackOverloadStaysOut: 48 requests at once on a method whose
// critical limit is 8: some share keys (waiters), some panic (recovered
// outside the Guard), some callers cancel. At no time do more than 8
// requests hold a place or more than 8 handlers run; every place comes
// back; a key whose handler succeeded ran once; the counts add up.
func TestAttackOverloadStaysOut(t *testing.T) {
	srv := &inventoryServer{}
	var c concurrency
	var runs sync.Map // order → *atomic.Int64
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		v, _ := runs.LoadOrStore(req.GetOrderId(), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		c.enter()
		defer c.leave()
		time.Sleep(40 * time.Millisecond)
		if req.GetSku() == "panic" {
			panic("boom")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: req.GetOrderId()}, nil
	}
	p := inventoryPolicy()
	p.Methods[1].Dedup.Lease = 300 * time.Millisecond
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(100)))
	if err != nil {
		t.Fatal(err)
	}
	arrived := &arrivals{seen: map[string]chan struct{}{}}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary), grpc.StatsHandler(arrived)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(stats(t, g).InFlight); n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	const n = 48
	var wg sync.WaitGroup
	var byCode sync.Map
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sku, key := "a", "ok-"+strconv.Itoa(i%6)
			if i%8 == 7 {
				sku, key = "panic", "panic-"+strconv.Itoa(i)
			}
			ctx, cancel := context.WithTimeout(withKey(context.Background(), key), 2*time.Second)
			defer cancel()
			if i%8 == 3 {
				// Cancelled 10ms after the server has it (admitted: shed, the
				// call has returned). Not 10ms after sending: on a loaded
				// machine the request may not have reached the server by
				// then, and one the Guard never saw is in none of its counts.
				id := strconv.Itoa(i)
				ctx = metadata.AppendToOutgoingContext(ctx, arrivalHeader, id)
				go func() {
					select {
					case <-arrived.of(id):
						time.Sleep(10 * time.Millisecond)
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			_, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: key, Sku: sku, Units: 1})
			v, _ := byCode.LoadOrStore(status.Code(err), new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}()
	}
	wg.Wait()
	eventually(t, "handlers returned", func() bool { return c.cur.Load() == 0 })
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	close(stop)
	<-sampled
	if pk := c.peak.Load(); pk > 8 {
		t.Errorf("%d handlers ran at once, the limit is 8", pk)
	}
	if pk := peak.Load(); pk > 8 {
		t.Errorf("%d places held at once, the limit is 8", pk)
	}
	total := int64(0)
	byCode.Range(func(k, v any) bool {
		switch k.(codes.Code) {
		case codes.OK, codes.Unavailable, codes.Canceled, codes.Internal:
		default:
			t.Errorf("%d requests answered %s", v.(*atomic.Int64).Load(), k)
		}
		total += v.(*atomic.Int64).Load()
		return true
	})
	s := stats(t, g)
	if got := s.Admitted[PriorityCritical] + s.Shed[PriorityCritical]; got != n || total != n {
		t.Errorf("admitted %d + shed %d = %d, answers %d; want %d", s.Admitted[PriorityCritical], s.Shed[PriorityCritical], got, total, n)
	}
	if s.Shed[PriorityCritical] == 0 {
		t.Error("nothing was shed: the test did not overload")
	}
	runs.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n > 1 {
			t.Errorf("key %s: handler ran %d times", k, n)
		}
		return true
	})
}

// arrivalHeader names a request for arrivals.
const arrivalHeader = "x-test-arrival"

// arrivals is a server stats handler telling when a request named by
// arrivalHeader has passed the InTapHandle (the Guard's admission) and
// reached the server's handling.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]chan struct{}
}

// of returns the channel closed when the request named id arrives.
func (a *arrivals) of(id string) <-chan struct{} { return a.chanOf(id) }

func (a *arrivals) chanOf(id string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.seen[id]
	if !ok {
		ch = make(chan struct{})
		a.seen[id] = ch
	}
	return ch
}

func (a *arrivals) HandleRPC(_ context.Context, s grpcstats.RPCStats) {
	h, ok := s.(*grpcstats.InHeader)
	if !ok {
		return
	}
	for _, id := range h.Header.Get(arrivalHeader) {
		ch := a.chanOf(id)
		a.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		a.mu.Unlock()
	}
}

func (a *arrivals) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context   { return ctx }
func (a *arrivals) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context { return ctx }
func (a *arrivals) HandleConn(context.Context, grpcstats.ConnStats)                       {}
