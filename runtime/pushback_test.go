package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestPushbackParsing(t *testing.T) {
	retryInfo, _ := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)})
	marked, _ := status.New(codes.Unavailable, "down").WithDetails(&errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain})
	for _, c := range []struct {
		name    string
		err     error
		trailer metadata.MD
		want    time.Duration
		ok      bool
	}{
		{"trailer -1", status.Error(codes.Unavailable, "x"), metadata.Pairs(runtime.PushbackHeader, "-1"), -1, true},
		{"trailer 200", status.Error(codes.Unavailable, "x"), metadata.Pairs(runtime.PushbackHeader, "200"), 200 * time.Millisecond, true},
		{"trailer garbage", status.Error(codes.Unavailable, "x"), metadata.Pairs(runtime.PushbackHeader, "soon"), -1, true},
		{"do-not-retry detail", marked.Err(), nil, -1, true},
		{"retry info", retryInfo.Err(), nil, 300 * time.Millisecond, true},
		{"nothing", status.Error(codes.Unavailable, "x"), nil, 0, false},
		{"nil", nil, nil, 0, false},
	} {
		if d, ok := runtime.Pushback(c.err, c.trailer); d != c.want || ok != c.ok {
			t.Errorf("%s: got %s %v, want %s %v", c.name, d, ok, c.want, c.ok)
		}
	}
}

// TestPushbackNegativeStopsRetries: the server's -1 (the do-not-retry mark
// of runtime/server) ends the retries after the first attempt.
func TestPushbackNegativeStopsRetries(t *testing.T) {
	for name, b := range map[string]server.Behaviour{
		"trailer": func(ctx context.Context, _ server.Call) error {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "-1"))
			return status.Error(codes.Unavailable, "failed below, retried there")
		},
		"detail": func(context.Context, server.Call) error {
			st, _ := status.New(codes.Unavailable, "failed below").WithDetails(&errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain})
			return st.Err()
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, cc := start(t, b)
			rt := inventory(t, policy.Service{Methods: []policy.Method{
				{Name: getStock, Idempotent: true, Retry: retryPolicy(3)},
			}})
			_, err := callGetStock(context.Background(), rt, cc)
			if status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrRetriesExhausted) {
				t.Errorf("%v, want the server's UNAVAILABLE, not retries exhausted", err)
			}
			if got := srv.Calls(getStock); got != 1 {
				t.Errorf("server saw %d attempts, want 1: it said not to retry", got)
			}
		})
	}
}

// TestPushbackPositiveReplacesTheBackoff: RESOURCE_EXHAUSTED with a
// pushback of 150ms is retried (it is listed) after 150ms, not after the
// policy's few milliseconds.
func TestPushbackPositiveReplacesTheBackoff(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	srv, cc := start(t, func(ctx context.Context, _ server.Call) error {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		_ = grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "150"))
		return status.Error(codes.ResourceExhausted, "busy")
	})
	retry := retryPolicy(2)
	retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.ResourceExhausted)
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}}})
	_, err := callGetStock(context.Background(), rt, cc)
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, runtime.ErrRetriesExhausted) {
		t.Fatalf("%v, want RESOURCE_EXHAUSTED after every attempt", err)
	}
	if srv.Calls(getStock) != 2 {
		t.Fatalf("server saw %d attempts, want 2", srv.Calls(getStock))
	}
	mu.Lock()
	gap := arrivals[1].Sub(arrivals[0])
	mu.Unlock()
	if gap < 150*time.Millisecond || gap > 400*time.Millisecond {
		t.Errorf("retried after %v, want the 150ms the server asked for", gap)
	}

	// A pushback longer than the time left: no retry, the real error at once.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = callGetStock(ctx, rt, cc)
	if status.Code(err) != codes.ResourceExhausted || time.Since(begin) > 50*time.Millisecond {
		t.Errorf("%v after %v, want RESOURCE_EXHAUSTED at once", err, time.Since(begin))
	}
}

// TestRetriesExhaustedKeepsTheLastError: the error after the last attempt
// matches ErrRetriesExhausted and keeps the code and the details of the
// dependency's error.
func TestRetriesExhaustedKeepsTheLastError(t *testing.T) {
	_, cc := start(t, func(context.Context, server.Call) error {
		st, _ := status.New(codes.Unavailable, "down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
		return st.Err()
	})
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(3)}}})
	_, err := callGetStock(context.Background(), rt, cc)
	if !errors.Is(err, runtime.ErrRetriesExhausted) || status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE matching ErrRetriesExhausted", err)
	}
	if d := status.Convert(err).Details(); len(d) != 1 {
		t.Errorf("details %v, want the dependency's RetryInfo kept", d)
	}
}

// TestGeneratedIdempotencyKey: a fresh key per call, the same on each of
// its attempts; it makes a method that is not idempotent retried.
func TestGeneratedIdempotencyKey(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, GenerateIdempotencyKey: true, Retry: retryPolicy(3)},
	}})
	_, _ = callGetStock(context.Background(), rt, cc)
	_, _ = callGetStock(context.Background(), rt, cc)
	keys := srv.Keys(getStock)
	if len(keys) != 6 || keys[0] != keys[1] || keys[1] != keys[2] || keys[3] != keys[4] || keys[4] != keys[5] || keys[0] == keys[3] {
		t.Errorf("keys %q, want one key per call, identical on its 3 attempts", keys)
	}
	if a, b := runtime.NewIdempotencyKey(), runtime.NewIdempotencyKey(); a == b || len(a) != 26 {
		t.Errorf("keys %q %q: want 26 random characters each time", a, b)
	}
}
