package runtime_test

// Attacks on the server's pushback where the trailer says more than one
// thing: grpc-retry-pushback-ms sent twice (a server and a proxy in front
// of it each adding one, or a handler that appends). gRPC's own retry
// (gRFC A6, grpc-go) does not retry on several values; neither may the
// runtime, above all when one of them says "do not retry".

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18Pushbacks answers UNAVAILABLE with the trailer holding every value
// of vs under grpc-retry-pushback-ms, in order.
func r18Pushbacks(vs ...string) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		md := metadata.MD{}
		for _, v := range vs {
			md.Append(runtime.PushbackHeader, v)
		}
		if err := grpc.SetTrailer(ctx, md); err != nil {
			return err
		}
		return status.Errorf(codes.Unavailable, "injected, pushback %q", vs)
	}
}

func TestAttackR18SeveralPushbackValuesStopTheRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		calls  int // what the server sees of one call allowing 3 attempts
	}{
		{"retry at once, then do not retry", []string{"0", "-1"}, 1},
		{"do not retry, then retry at once", []string{"-1", "0"}, 1},
		{"twice the same", []string{"1", "1"}, 1},
		{"one value", []string{"1"}, 3}, // the check that retries happen at all
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := startFault(t, r18Pushbacks(tc.values...))
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker = nil
				m := atkMethod(p, atkGetStock)
				m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want UNAVAILABLE", err)
			}
			if n := fs.Calls(atkGetStock); n != tc.calls {
				t.Errorf("pushback %q: the server saw %d calls, want %d", tc.values, n, tc.calls)
			}
		})
	}
}

// The same for a hedged method: several values stop further copies.
func TestAttackR18SeveralPushbackValuesStopTheHedge(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, r18Pushbacks("0", "-1"))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: 100 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want UNAVAILABLE", err)
	}
	if n := fs.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d copies, want 1: its pushback said, among other things, do not retry", n)
	}
}

// A status carrying the server's RetryInfo (it shed the request and says
// when to come back) and, after it, the do-not-retry mark: what a service
// does that returns, without runtime/server's Guard, an error its own
// dependency marked (WithDetails appends the mark after the details the
// error had). The mark says the request was retried below already; it
// wins wherever it is in the list, and over a trailer that says retry.
func TestAttackR18DoNotRetryMarkWinsOverAnEarlierRetryInfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trailer string // grpc-retry-pushback-ms, if any
		details []protoadapt.MessageV1
		calls   int
	}{
		{"retry info, then the mark", "", []protoadapt.MessageV1{r18RetryIn(time.Millisecond), r18Mark()}, 1},
		{"the mark, then retry info", "", []protoadapt.MessageV1{r18Mark(), r18RetryIn(time.Millisecond)}, 1},
		{"a trailer saying retry at once, and the mark", "0", []protoadapt.MessageV1{r18Mark()}, 1},
		// The checks that these retry at all:
		{"retry info alone", "", []protoadapt.MessageV1{r18RetryIn(time.Millisecond)}, 3},
		{"a trailer saying retry at once, and retry info", "0", []protoadapt.MessageV1{r18RetryIn(time.Hour)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
				if tc.trailer != "" {
					if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, tc.trailer)); err != nil {
						return err
					}
				}
				st, err := status.New(codes.Unavailable, "injected").WithDetails(tc.details...)
				if err != nil {
					return err
				}
				return st.Err()
			})
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker = nil
				m := atkMethod(p, atkGetStock)
				m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want UNAVAILABLE", err)
			}
			if n := fs.Calls(atkGetStock); n != tc.calls {
				t.Errorf("the server saw %d calls, want %d", n, tc.calls)
			}
		})
	}
}

func r18RetryIn(d time.Duration) protoadapt.MessageV1 {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

func r18Mark() protoadapt.MessageV1 {
	return &errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain}
}
