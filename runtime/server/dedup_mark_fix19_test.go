package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// hasShedMark reports whether err carries a Guard's refusal mark: the
// priority-shedding one or the deadline-too-short one.
func hasShedMark(err error) bool {
	m := marks(err)
	return m[runtime.ShedReason] || m[runtime.DeadlineReason]
}

// TestFix19ReplayedFailureKeepsTheMark: a keyed request whose handler fails
// after its dependency failed is marked do-not-retry (the dependency's shed
// mark stripped); a repeat with the same key, served from the store, gets
// the same code and message with the mark, as detail and as the -1
// trailer, and without the shed mark; the handler and its dependency ran
// once. A failure that was not marked is replayed without the mark.
func TestFix19ReplayedFailureKeepsTheMark(t *testing.T) {
	shed, _ := status.New(codes.ResourceExhausted, "payments sheds low").WithDetails(&errdetails.ErrorInfo{
		Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain, Metadata: map[string]string{"priority": "low"}})
	cases := []struct {
		name       string
		downstream error // what the dependency answers
		callDown   bool  // the handler calls its dependency
		own        error // the handler's failure when it does not
		code       codes.Code
		marked     bool
	}{
		{name: "dependency down", downstream: status.Error(codes.Unavailable, "payments down"), callDown: true, code: codes.Unavailable, marked: true},
		{name: "dependency shed it", downstream: shed.Err(), callDown: true, code: codes.ResourceExhausted, marked: true},
		{name: "its own failure", own: status.Error(codes.Unavailable, "warming up"), code: codes.Unavailable, marked: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			down := &inventoryServer{onGet: func(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				return nil, c.downstream
			}}
			next := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, down), grpc.WithChainUnaryInterceptor(ClientInterceptor())))
			srv := &inventoryServer{onReserve: func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if !c.callDown {
					return nil, c.own
				}
				_, err := next.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: req.GetSku()})
				return nil, err
			}}
			p := inventoryPolicy()
			// Failures of these codes are this method's answers: kept and replayed.
			p.Methods[1].Dedup.FinalCodes = policy.CodesOf(codes.Unavailable, codes.ResourceExhausted, codes.FailedPrecondition)
			g, client, _ := guarded(t, srv, []*policy.Server{p})

			var errs [2]error
			var trailers [2]metadata.MD
			for i := range errs {
				_, errs[i] = reserve(t, client, "o-mark", grpc.Trailer(&trailers[i]))
			}
			for i, err := range errs {
				what := [2]string{"first answer", "replay"}[i]
				if status.Code(err) != c.code {
					t.Fatalf("%s: %v, want %s", what, err, c.code)
				}
				if got, want := status.Convert(err).Message(), status.Convert(errs[0]).Message(); got != want {
					t.Errorf("%s: message %q, want the first's %q", what, got, want)
				}
				if IsDoNotRetry(err) != c.marked {
					t.Errorf("%s: do-not-retry detail %v, want %v: %v", what, IsDoNotRetry(err), c.marked, status.Convert(err).Proto())
				}
				pb := trailers[i].Get(PushbackHeader)
				if c.marked && (len(pb) != 1 || pb[0] != "-1") {
					t.Errorf("%s: %s trailer %q, want one -1", what, PushbackHeader, pb)
				}
				if !c.marked && len(pb) != 0 {
					t.Errorf("%s: %s trailer %q on a failure that was not marked", what, PushbackHeader, pb)
				}
				// Each word on its own says do not retry.
				if d, ok := runtime.Pushback(nil, trailers[i]); c.marked && (!ok || d >= 0) {
					t.Errorf("%s: the trailer alone reads as pushback %s %v, want do not retry", what, d, ok)
				}
				if d, ok := runtime.Pushback(err, nil); c.marked != (ok && d < 0) {
					t.Errorf("%s: the status alone reads as pushback %s %v, want do-not-retry %v", what, d, ok, c.marked)
				}
				if hasShedMark(err) {
					t.Errorf("%s: carries the dependency's shed mark: %v", what, status.Convert(err).Proto())
				}
			}
			if got := trailers[1].Get(ReplayedHeader); len(got) != 1 || got[0] != "true" {
				t.Errorf("the repeat was not replayed from the store: %s %v", ReplayedHeader, got)
			}
			if n := srv.reserveCalls.Load(); n != 1 {
				t.Errorf("the handler ran %d times for one key, want 1", n)
			}
			if n, want := down.getCalls.Load(), map[bool]int64{true: 1, false: 0}[c.callDown]; n != want {
				t.Errorf("the dependency was called %d times, want %d", n, want)
			}
			s := stats(t, g)
			if want := map[bool]uint64{true: 2, false: 0}[c.marked]; s.MarkedDoNotRetry != want {
				t.Errorf("counted %d marked answers, want %d (the first and its replay)", s.MarkedDoNotRetry, want)
			}
			if s.Replayed != 1 {
				t.Errorf("replayed %d, want 1", s.Replayed)
			}
		})
	}
}

// TestFix19LeaseLostKeepsTheHandlersMark: the UNAVAILABLE that replaces a
// marked failure whose request lost its key is marked too (the handler's
// failure is marked before dedup sees it); an unmarked one is not.
func TestFix19LeaseLostKeepsTheHandlersMark(t *testing.T) {
	m := &method{name: reserveStock}
	if err := leaseLost(m, DoNotRetry(status.Error(codes.Unavailable, "payments down"))); status.Code(err) != codes.Unavailable || !IsDoNotRetry(err) {
		t.Errorf("lease lost after a marked failure: %v, want UNAVAILABLE with the mark", err)
	}
	if err := leaseLost(m, status.Error(codes.Unavailable, "warming up")); IsDoNotRetry(err) {
		t.Errorf("lease lost after an unmarked failure is marked: %v", err)
	}
	if err := leaseLost(m, nil); status.Code(err) != codes.Unavailable || IsDoNotRetry(err) {
		t.Errorf("lease lost after a success: %v", err)
	}
}

// TestFix19ReplayOfAnOldEntryDropsTheShedMark: an entry kept before the
// Guard settled failures before keeping them holds a dependency's shed
// mark and the do-not-retry mark as the handler returned them; its replay
// is sent without the shed mark (nor any refusal mark), with the do-not-retry mark and its
// trailer, and the handler does not run.
func TestFix19ReplayOfAnOldEntryDropsTheShedMark(t *testing.T) {
	st, _ := status.New(codes.ResourceExhausted, "payments sheds low").WithDetails(
		&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.ErrorInfo{Reason: runtime.DeadlineReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.ErrorInfo{Reason: DoNotRetryReason, Domain: DoNotRetryDomain})
	o := outcome{status: st.Proto()}
	b, err := o.encode()
	if err != nil {
		t.Fatal(err)
	}
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-old", Sku: "a", Units: 1}
	fp, err := fingerprint(req)
	if err != nil {
		t.Fatal(err)
	}
	store := NewMemoryStore(10)
	ctx := ctxTimeout(t, 5*time.Second)
	key := storeKey(reserveStock, "", "o-old")
	if c, err := store.Claim(ctx, key, "t", fp, time.Minute); err != nil || c.State != Claimed {
		t.Fatalf("claim: %v %v", c, err)
	}
	if err := store.Complete(ctx, key, "t", b, time.Minute); err != nil {
		t.Fatal(err)
	}
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
	var trailer metadata.MD
	_, err = client.ReserveStock(withKey(ctx, "o-old"), req, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted || !IsDoNotRetry(err) || hasShedMark(err) {
		t.Errorf("replay: %v, want RESOURCE_EXHAUSTED with the do-not-retry mark and without the shed mark", status.Convert(err).Proto())
	}
	if pb := trailer.Get(PushbackHeader); len(pb) != 1 || pb[0] != "-1" {
		t.Errorf("replay: %s trailer %q, want one -1", PushbackHeader, pb)
	}
	if n := srv.reserveCalls.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a kept key", n)
	}
	if s := stats(t, g); s.Replayed != 1 || s.MarkedDoNotRetry != 1 {
		t.Errorf("replayed %d, marked %d, want 1 and 1", s.Replayed, s.MarkedDoNotRetry)
	}
}
