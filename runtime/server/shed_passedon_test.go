package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// shedMarks says which of the Guard's marks a status carries: the
// priority-shedding one, and whether a RetryInfo is there.
func shedMarks(err error) (shed, retryInfo bool) {
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetReason() == runtime.ShedReason && d.GetDomain() == runtime.DoNotRetryDomain {
				shed = true
			}
		case *errdetails.RetryInfo:
			retryInfo = true
		}
	}
	return shed, retryInfo
}

// TestShedMarkIsNotPassedOn: C sheds a low-priority request of B's (its
// two low places are held) and marks the refusal as priority shedding; B's
// handler passes C's error on to its own caller. B did not shed that
// request, so the caller gets the failure without the mark (its breaker
// judges it by its code, UNAVAILABLE, as any failure of B's), the code
// and the pushback kept. Asked directly, C's refusal carries the mark.
func TestShedMarkIsNotPassedOn(t *testing.T) {
	toC, c := shedAllLow(t)
	low := func() context.Context { return lowCtx(context.Background()) }

	_, direct := toC.GetStock(low(), &inventoryv1.GetStockRequest{Sku: "a"})
	if shed, ri := shedMarks(direct); status.Code(direct) != codes.Unavailable || !shed || !ri {
		t.Fatalf("C's own refusal: %v (shed mark %v, RetryInfo %v); want UNAVAILABLE with both", direct, shed, ri)
	}

	b := &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		return toC.GetStock(low(), req) // C's answer, passed on as it is
	}}
	bPolicy := inventoryPolicy()
	bPolicy.Shedding = nil // B sheds nothing itself
	gb, err := NewGuard([]*policy.Server{bPolicy}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	toB := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, b, gb.ServerOptions()...)))
	_, passed := toB.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"})
	shed, ri := shedMarks(passed)
	if status.Code(passed) != codes.Unavailable || shed || !ri {
		t.Errorf("C's refusal passed on by B: %v (shed mark %v, RetryInfo %v); want UNAVAILABLE with the RetryInfo and without the shed mark", passed, shed, ri)
	}
	if c.getCalls.Load() != 2 {
		t.Errorf("C ran GetStock %d times; want 2 (the held ones), the others shed", c.getCalls.Load())
	}
}

// TestNotRefusedHereKeepsTheRest: only the Guard's refusal marks are taken out of
// a handler's error; an error that is not a status, or has no mark, is
// returned as the same value; the other details stay, in order.
func TestNotRefusedHereKeepsTheRest(t *testing.T) {
	plain := context.DeadlineExceeded
	if got := notRefusedHere(plain, getStock); got != plain {
		t.Errorf("a bare error came back as %v", got)
	}
	bare := status.Error(codes.Unavailable, "down")
	if got := notRefusedHere(bare, getStock); got != bare {
		t.Errorf("a status without details came back as another value: %v", got)
	}
	other, _ := status.New(codes.Unavailable, "down").WithDetails(
		&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: "example.com"},
		&errdetails.ErrorInfo{Reason: "QUOTA", Domain: runtime.DoNotRetryDomain})
	if ds := status.Convert(notRefusedHere(other.Err(), getStock)).Details(); len(ds) != 2 {
		t.Errorf("marks that are not the Guard's shed mark were taken out: %v", ds)
	}
	marked, _ := status.New(codes.ResourceExhausted, "shed").WithDetails(
		&errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.ErrorInfo{Reason: runtime.DeadlineReason, Domain: runtime.DoNotRetryDomain},
		&errdetails.RetryInfo{})
	got := status.Convert(notRefusedHere(marked.Err(), getStock))
	ds := got.Details()
	if got.Code() != codes.ResourceExhausted || got.Message() != "shed" || len(ds) != 2 {
		t.Fatalf("after taking the refusal marks out: %v %q %v; want RESOURCE_EXHAUSTED, the message and two details", got.Code(), got.Message(), ds)
	}
	if ei, ok := ds[0].(*errdetails.ErrorInfo); !ok || ei.GetReason() != runtime.DoNotRetryReason {
		t.Errorf("first detail %v; want the do-not-retry mark", ds[0])
	}
	if _, ok := ds[1].(*errdetails.RetryInfo); !ok {
		t.Errorf("second detail %v; want the RetryInfo", ds[1])
	}
}

// TestDeadlineRefusalIsMarked: a request refused for a deadline too short
// to start (in the tap, before decoding) answers DEADLINE_EXCEEDED with
// the Guard's deadline mark, which the client's breaker counts as
// nothing, and the do-not-retry mark, which runtime.Pushback reads as "do
// not retry": a retry would have less time still. The handler never ran.
// The deadline is 2 s against a MinDeadline of 10 s, so that a loaded
// machine cannot expire it on the client's side (without the marks)
// before the Guard's refusal comes back, as a 20 ms one against 50 ms
// could.
func TestDeadlineRefusalIsMarked(t *testing.T) {
	srv := &inventoryServer{}
	p := inventoryPolicy()
	for i := range p.Methods {
		if p.Methods[i].Name == getStock {
			p.Methods[i].MinDeadline, p.Methods[i].DefaultTimeout = 10*time.Second, 20*time.Second
		}
	}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, g.ServerOptions()...)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = client.GetStock(ctx, &inventoryv1.GetStockRequest{})
	m := marks(err)
	short, dnr := m[runtime.DeadlineReason], m[runtime.DoNotRetryReason]
	if status.Code(err) != codes.DeadlineExceeded || !short || !dnr {
		t.Errorf("a 2 s deadline against a 10 s MinDeadline: %v (deadline mark %v, do-not-retry %v); want DEADLINE_EXCEEDED with both", err, short, dnr)
	}
	if d, ok := runtime.Pushback(err, nil); !ok || d >= 0 {
		t.Errorf("Pushback of the refusal: %v, %v; want a negative pushback (do not retry)", d, ok)
	}
	if srv.getCalls.Load() != 0 {
		t.Errorf("the handler ran %d times; want none", srv.getCalls.Load())
	}
}
