package runtime

// Attack 24i on this stop's client-runtime fixes, below the handles: the
// retry budget's give-back (budget.giveBack, window.Time.Remove) under
// concurrent callers on a clock that crosses bucket boundaries, the
// re-check of a shared call's failure (startersOwn) fed hostile values,
// and targetOf's reflection over option types of the program's.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime/internal/window"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack24iBudgetGiveBackUnderConcurrentCallersMatchesAModel: README,
// Retries and the retry budget (a retry decided and not sent is given
// back). 100 callers at once on a clock that moves across the buckets of
// a 99 ms window (11 ms each: a budget's buckets are a ninth of its window), each taking retries from the budget and
// giving some back, some at once and some after the clock moved on past
// their bucket (a give-back late by a whole window). A give-back must take
// back its own retry only: never one twice, never one a later window
// rotated out (which would take from a newer bucket's count and leave the
// budget above what its retries allow). At the end the budget's window
// holds exactly the retries kept in the buckets still in it, its count
// never wrapped, and available is the allowance less those.
func TestAttack24iBudgetGiveBackUnderConcurrentCallersMatchesAModel(t *testing.T) {
	p := policy.Budget{Ratio: 0.5, MinRetries: 3, Window: 99 * time.Millisecond}
	width := lastingWidth(p.Window)
	b := newBudget(p, time.Time{})
	var clock atomic.Int64
	var mu sync.Mutex
	kept := map[int64]int{}     // bucket index (at/width) → retries kept there
	requests := map[int64]int{} // bucket index → requests counted there
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 24))
			for range 300 {
				now := clock.Add(int64(r.IntN(40_000))) // ~10 ms over all callers per 25 steps
				b.request(now)
				mu.Lock()
				requests[now/width]++
				mu.Unlock()
				at := clock.Load()
				if !b.tryRetry(at) {
					continue
				}
				switch r.IntN(3) {
				case 0: // sent: kept
					mu.Lock()
					kept[at/width]++
					mu.Unlock()
				case 1: // not sent: given back at once
					b.giveBack(at)
				case 2: // given back after the clock moved on, maybe past its bucket
					clock.Add(int64(r.IntN(int(2 * width))))
					b.giveBack(at)
				}
			}
		})
	}
	wg.Wait()
	now := clock.Load()
	cur := now / width
	wantRetries, wantRequests := 0, 0
	for q, n := range kept {
		if cur-q < window.Buckets {
			wantRetries += n
		}
	}
	for q, n := range requests {
		if cur-q < window.Buckets-1 { // a request stays one bucket less than a retry

			wantRequests += n
		}
	}
	gotRequests, gotRetries := b.w.SumSplit(now)
	if int(gotRequests) != wantRequests {
		t.Errorf("the window holds %d requests, want %d", gotRequests, wantRequests)
	}
	if int(gotRetries) != wantRetries {
		t.Errorf("the window holds %d retries, want the %d kept in its buckets: a give-back took another's retry or none", gotRetries, wantRetries)
	}
	if gotRetries > window.MaxBucketCount*window.Buckets {
		t.Errorf("the window's retries wrapped: %d", gotRetries)
	}
	if got, want := b.available(now), max(0, int(b.allowance(gotRequests))-wantRetries); got != want {
		t.Errorf("available = %d, want %d", got, want)
	}
}

// panicCodec24i is a codec of the program's that panics on every message.
type panicCodec24i struct{}

func (panicCodec24i) Marshal(any) (mem.BufferSlice, error) { panic("codec 24i") }
func (panicCodec24i) Unmarshal(mem.BufferSlice, any) error { panic("codec 24i") }
func (panicCodec24i) Name() string                         { return "panic24i" }

// TestAttack24iStartersOwnNeverPanics: startersOwn runs on a shared call's
// goroutine, where a panic would take the program down. Fed a nil
// request, a codec that panics, metadata holding nil slices, and gRPC-like
// messages cut short (no quote, no number, a number past int), it answers
// and never panics; the answers that can be told are the right ones.
func TestAttack24iStartersOwnNeverPanics(t *testing.T) {
	fault := func(c codes.Code, msg string) error { return status.Error(c, msg) }
	var nilReq *wrapperspb.StringValue
	withMD := func(md metadata.MD) context.Context { return metadata.NewOutgoingContext(context.Background(), md) }
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		req  *wrapperspb.StringValue
		opts []grpc.CallOption
		want bool
	}{
		{"nil request, marshal failure, proto codec", context.Background(),
			fault(codes.Internal, marshalFailure+": boom"), nilReq, nil, false},
		{"a codec that panics", context.Background(), fault(codes.Internal, marshalFailure+": boom"), nilReq,
			[]grpc.CallOption{grpc.ForceCodecV2(panicCodec24i{})}, true},
		{"metadata with a nil slice under the named key", withMD(metadata.MD{"x-a": nil}),
			fault(codes.Internal, `header key "x-a" contains value with non-printable ASCII characters`), nilReq, nil, false},
		{"metadata with a nil slice under an illegal key", withMD(metadata.MD{"x a": nil}),
			fault(codes.Internal, `header key "x a" contains illegal characters`), nilReq, nil, true},
		{"empty key", withMD(metadata.MD{"": nil}),
			fault(codes.Internal, emptyKey), nilReq, nil, true},
		{"header key without a quote", withMD(metadata.MD{"x": {"\x01"}}),
			fault(codes.Internal, namedKey), nilReq, nil, false},
		{"header key with a quote cut short", withMD(metadata.MD{"x": {"\x01"}}),
			fault(codes.Internal, namedKey+`"x`), nilReq, nil, false},
		{"no metadata", context.Background(),
			fault(codes.Internal, `header key "x" contains illegal characters`), nilReq, nil, false},
		{"size limit quoting no number", context.Background(),
			fault(codes.ResourceExhausted, tooLargeToSend), nilReq, []grpc.CallOption{grpc.MaxCallSendMsgSize(4)}, false},
		{"size limit quoting a number past int", context.Background(),
			fault(codes.ResourceExhausted, tooLargeToSend+" (9 vs. 99999999999999999999999)"), nilReq,
			[]grpc.CallOption{grpc.MaxCallSendMsgSize(4)}, false},
		{"nil size-limit pointers", context.Background(),
			fault(codes.ResourceExhausted, tooLargeToSend+" (9 vs. 4)"), nilReq,
			[]grpc.CallOption{(*grpc.MaxSendMsgSizeCallOption)(nil), (*grpc.CompressorCallOption)(nil), (*grpc.ForceCodecV2CallOption)(nil)}, false},
		{"compressor missing, nil pointers", context.Background(),
			fault(codes.Internal, compressorMissing+" x"), nilReq,
			[]grpc.CallOption{(*grpc.CompressorCallOption)(nil), (*grpc.ContentSubtypeCallOption)(nil)}, false},
		{"codec missing, nil pointers", context.Background(),
			fault(codes.Internal, codecMissing+" x"), nilReq,
			[]grpc.CallOption{(*grpc.ContentSubtypeCallOption)(nil), (*grpc.CustomCodecCallOption)(nil), (*grpc.ForceCodecCallOption)(nil)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("startersOwn panicked: %v", r)
				}
			}()
			if got := startersOwn(c.ctx, c.err, c.req, c.opts); got != c.want {
				t.Errorf("startersOwn = %v, want %v", got, c.want)
			}
		})
	}
}

// Option types of the program's that targetOf must walk without a panic
// or an endless loop.
type (
	// holdsNil24i embeds the interface: a value may hold nil.
	holdsNil24i struct{ grpc.CallOption }
	// self24i points to itself, and promotes the Header option.
	self24i struct {
		*self24i
		grpc.HeaderCallOption
	}
	// loopA24i and loopB24i point to each other; A's methods come through
	// B, B's from its Trailer option.
	loopA24i struct{ *loopB24i }
	loopB24i struct {
		*loopA24i
		grpc.TrailerCallOption
	}
	// deep24i embeds the Peer option nine pointers deep.
	deep24i struct{ *d1 }
	d1      struct{ *d2 }
	d2      struct{ *d3 }
	d3      struct{ *d4 }
	d4      struct{ *d5 }
	d5      struct{ *d6 }
	d6      struct{ *d7 }
	d7      struct{ *d8 }
	d8      struct{ *d9 }
	d9      struct{ grpc.PeerCallOption }
)

// TestAttack24iTargetOfWalksHostileOptionTypes: README, Hedging / Cache
// (embedded Header, Trailer and Peer options). An option of the program's
// embedding an interface that holds nil, one pointing to itself, two
// pointing to each other, and nil pointers of each: targetOf and
// callerMetaOf answer, never panic, never loop, and find the option where
// Go promotes its methods from. (A non-struct type cannot be a
// grpc.CallOption outside grpc-go: its methods are unexported and a
// defined type of a func, map or pointer has no promoted methods.)
func TestAttack24iTargetOfWalksHostileOptionTypes(t *testing.T) {
	var md metadata.MD
	s := &self24i{HeaderCallOption: grpc.HeaderCallOption{HeaderAddr: &md}}
	s.self24i = s
	a := &loopA24i{}
	a.loopB24i = &loopB24i{loopA24i: a, TrailerCallOption: grpc.TrailerCallOption{TrailerAddr: &md}}
	cases := []struct {
		name string
		o    grpc.CallOption
		want callerTarget
	}{
		{"interface holding nil", holdsNil24i{}, writesNothing},
		{"pointer to one holding nil", &holdsNil24i{}, writesNothing},
		{"nil pointer to one holding an interface", (*holdsNil24i)(nil), writesNothing},
		{"interface holding a Header option", holdsNil24i{grpc.Header(&md)}, writesHeader},
		{"interface holding one holding nil", holdsNil24i{holdsNil24i{}}, writesNothing},
		{"interface holding itself, nested", holdsNil24i{&holdsNil24i{holdsNil24i{grpc.Peer(nil)}}}, writesPeer},
		{"self-pointing", s, writesHeader},
		{"self-pointing by value", *s, writesHeader},
		{"nil self-pointing pointer", (*self24i)(nil), writesNothing},
		{"two pointing to each other", a, writesTrailer},
		{"nil loop pointer", (*loopA24i)(nil), writesNothing},
		{"a loop whose other end is nil", &loopA24i{}, writesNothing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panicked: %v", r)
				}
			}()
			done := make(chan callerTarget, 1)
			go func() { done <- targetOf(c.o) }()
			select {
			case got := <-done:
				if got != c.want {
					t.Errorf("targetOf = %v, want %v", got, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("targetOf did not return")
			}
			cm := callerMetaOf([]grpc.CallOption{c.o})
			if (cm != nil) != (c.want != writesNothing) {
				t.Errorf("callerMetaOf = %+v for an option that writes %v", cm, c.want)
			}
			kept := sharedOptions([]grpc.CallOption{c.o})
			if (len(kept) == 1) != (c.want == writesNothing) {
				t.Errorf("sharedOptions kept %d of an option that writes %v", len(kept), c.want)
			}
		})
	}
}

// TestAttack24iTargetOfSeesAsDeepAsNilIn: an option of the program's
// embedding the Peer option through 5 pointers (6 with the option's own)
// is one nilIn looks through (maxNilDepth pointers): targetOf must see it
// too, or a cache's shared call keeps a Peer option writing into its
// starter's memory after the starter returned, and each hedged copy
// writes the caller's peer itself.
func TestAttack24iTargetOfSeesAsDeepAsNilIn(t *testing.T) {
	var p peer.Peer
	five := &d5{&d6{&d7{&d8{&d9{grpc.PeerCallOption{PeerAddr: &p}}}}}}
	if got := targetOf(five); got != writesPeer {
		t.Errorf("targetOf(5 pointers deep) = %v, want writesPeer (%v)", got, writesPeer)
	}
	if got := targetOf(*five); got != writesPeer {
		t.Errorf("targetOf(4 pointers deep) = %v, want writesPeer (%v)", got, writesPeer)
	}
	if kept := sharedOptions([]grpc.CallOption{five}); len(kept) != 0 {
		t.Errorf("sharedOptions kept the deep Peer option: %v", kept)
	}
	// Past maxNilDepth pointers the runtime looks no further, as nilIn.
	all := &deep24i{&d1{&d2{&d3{&d4{five}}}}}
	if got := targetOf(all); got != writesNothing {
		t.Errorf("targetOf(10 pointers deep) = %v, want writesNothing: deeper than the runtime looks", got)
	}
}
