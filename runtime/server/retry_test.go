package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

func TestDoNotRetry(t *testing.T) {
	if DoNotRetry(nil) != nil {
		t.Error("DoNotRetry(nil) is not nil")
	}
	err := DoNotRetry(status.Error(codes.Unavailable, "payments down"))
	if !IsDoNotRetry(err) || status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "payments down" {
		t.Errorf("marked error %v lost its code or message, or the mark", err)
	}
	if again := DoNotRetry(err); len(status.Convert(again).Details()) != 1 {
		t.Error("marking twice added a second detail")
	}
	if IsDoNotRetry(status.Error(codes.Unavailable, "x")) || IsDoNotRetry(errors.New("x")) || IsDoNotRetry(nil) {
		t.Error("unmarked errors reported as marked")
	}
	// A plain error becomes UNKNOWN with the mark.
	if e := DoNotRetry(errors.New("boom")); !IsDoNotRetry(e) || status.Code(e) != codes.Unknown {
		t.Errorf("plain error: %v", e)
	}
}

func TestPushback(t *testing.T) {
	retryInfo, _ := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)})
	cases := []struct {
		name    string
		err     error
		trailer metadata.MD
		want    time.Duration
		ok      bool
	}{
		{"trailer -1", status.Error(codes.Unavailable, "x"), metadata.Pairs(PushbackHeader, "-1"), -1, true},
		{"trailer 200", status.Error(codes.Unavailable, "x"), metadata.Pairs(PushbackHeader, "200"), 200 * time.Millisecond, true},
		{"trailer garbage means do not retry", status.Error(codes.Unavailable, "x"), metadata.Pairs(PushbackHeader, "soon"), -1, true},
		{"detail", DoNotRetry(status.Error(codes.Unavailable, "x")), nil, -1, true},
		{"retry info", retryInfo.Err(), nil, 300 * time.Millisecond, true},
		{"nothing", status.Error(codes.Unavailable, "x"), nil, 0, false},
		{"nil", nil, nil, 0, false},
	}
	for _, c := range cases {
		d, ok := runtime.Pushback(c.err, c.trailer)
		if d != c.want || ok != c.ok {
			t.Errorf("%s: got %s %v, want %s %v", c.name, d, ok, c.want, c.ok)
		}
	}
}

// TestMarkedAutomatically: what the Guard marks on its own, over loopback.
func TestMarkedAutomatically(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"breaker open", &runtime.Error{Code: codes.Unavailable, Reason: runtime.ErrCircuitOpen, Detail: "circuit breaker open towards payments"}, true},
		{"budget spent", &runtime.Error{Code: codes.Unavailable, Reason: runtime.ErrBudgetExhausted, Cause: status.Error(codes.Unavailable, "down"), Detail: "retry budget exhausted"}, true},
		{"retries exhausted", &runtime.Error{Code: codes.Unavailable, Reason: runtime.ErrRetriesExhausted, Cause: status.Error(codes.Unavailable, "down"), Detail: "3 attempts towards payments failed"}, true},
		{"marked below, passed on", fmt.Errorf("reserve: %w", DoNotRetry(status.Error(codes.Unavailable, "down"))), true},
		{"its own UNAVAILABLE", status.Error(codes.Unavailable, "warming up"), false},
		{"an answer", status.Error(codes.NotFound, "no such sku"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := &inventoryServer{onGet: func(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				return nil, c.err
			}}
			g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
			var trailer metadata.MD
			_, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}, grpc.Trailer(&trailer))
			d, ok := runtime.Pushback(err, trailer)
			got := ok && d < 0
			if got != c.want {
				t.Errorf("marked %v (trailer %v), want %v", got, trailer.Get(PushbackHeader), c.want)
			}
			if got && (!IsDoNotRetry(err) || trailer.Get(PushbackHeader)[0] != "-1") {
				t.Errorf("want both the trailer and the detail: %v %v", err, trailer)
			}
			if s := stats(t, g); (s.MarkedDoNotRetry == 1) != c.want {
				t.Errorf("counted %d marks", s.MarkedDoNotRetry)
			}
		})
	}
}

// TestClientInterceptorForwardsPriority: a handler serving a low request
// calls its dependency at low priority without doing anything.
func TestClientInterceptorForwardsPriority(t *testing.T) {
	seen := make(chan []string, 2)
	next := &inventoryServer{}
	next.sawCtx = func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		seen <- md.Get(PriorityHeader)
	}
	nextCC := dial(t, serve(t, next), grpc.WithChainUnaryInterceptor(ClientInterceptor()))
	_, client, _ := guarded(t, &relay{next: inventoryv1.NewInventoryServiceClient(nextCC)}, []*policy.Server{inventoryPolicy()})
	if _, err := client.GetStock(runtime.WithPriority(ctxTimeout(t, time.Second), PriorityLow), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; len(got) != 1 || got[0] != "low" {
		t.Errorf("dependency saw priority %v, want [low]", got)
	}
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; len(got) != 1 || got[0] != "high" {
		t.Errorf("dependency saw priority %v, want [high] (GetStock's annotation)", got)
	}
	// Outside a served request it does nothing.
	if p, ok := PriorityFrom(context.Background()); ok {
		t.Errorf("PriorityFrom outside a request: %s", p)
	}
}

// TestMarkedOnStreams: a stream handler that fails because its
// dependency's breaker is open ends with the mark, trailer and detail,
// counted once; one that fails with its own UNAVAILABLE is not marked.
func TestMarkedOnStreams(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"breaker open", &runtime.Error{Code: codes.Unavailable, Reason: runtime.ErrCircuitOpen, Detail: "circuit breaker open towards payments"}, true},
		{"its own UNAVAILABLE", status.Error(codes.Unavailable, "warming up"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &inventoryServer{onWatch: func(context.Context) error { return c.err }}
			g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
			st, err := client.WatchStock(ctxTimeout(t, time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Recv()
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("Recv: %v, want the handler's UNAVAILABLE", err)
			}
			trailer := st.Trailer()
			d, ok := runtime.Pushback(err, trailer)
			if got := ok && d < 0; got != c.want {
				t.Errorf("marked %v (trailer %v), want %v", got, trailer.Get(PushbackHeader), c.want)
			}
			if c.want && (!IsDoNotRetry(err) || len(trailer.Get(PushbackHeader)) != 1 || trailer.Get(PushbackHeader)[0] != "-1") {
				t.Errorf("want both the trailer and the detail: %v %v", err, trailer)
			}
			if s := stats(t, g); (s.MarkedDoNotRetry == 1) != c.want {
				t.Errorf("counted %d marks", s.MarkedDoNotRetry)
			}
		})
	}
}
