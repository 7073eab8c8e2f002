package runtime_test

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack19LongerRetryInfoNeverWaitsLess: the wait Pushback reads from
// a RetryInfo never shrinks as the delay the server asks for grows. A
// delay past the longest Duration (293 years) is that Duration; one past
// protobuf's own range of a Duration (10000 years, so CheckValid refuses
// it) used to say nothing, and the policy's backoff retried at once what
// the server asked to wait the longest for. Positive and too long is not
// malformed the way a negative delay or nanos of the other sign are: it
// is as long as the longest pushback, as for the trailer (a value beyond
// int64). Nanos past a second stay malformed at any length.
func TestAttack19LongerRetryInfoNeverWaitsLess(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seconds int64
		nanos   int32
		want    time.Duration
		ok      bool
	}{
		{"one hour", 3600, 0, time.Hour, true},
		{"past the longest Duration", math.MaxInt64/int64(time.Second) + 1, 0, math.MaxInt64, true},
		{"protobuf's longest", 315576000000, 0, math.MaxInt64, true},
		{"past protobuf's range", 315576000001, 0, math.MaxInt64, true},
		{"the largest int64 of seconds", math.MaxInt64, 999999999, math.MaxInt64, true},
		{"past protobuf's range, nanos past a second", 315576000001, 1e9, 0, false},
		{"past protobuf's range, nanos negative", 315576000001, -1, 0, false},
		{"far below protobuf's range", math.MinInt64, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := status.New(codes.Unavailable, "busy").WithDetails(retryIn(tc.seconds, tc.nanos))
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := runtime.Pushback(st.Err(), nil); d != tc.want || ok != tc.ok {
				t.Errorf("Pushback: %v %v, want %v %v", d, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAttack19RetryInfoPastProtobufsRangeEndsTheRetries: a real server
// refuses every attempt with a RetryInfo of 10001 years. The wait is
// longer than the call's 2 s, so the retries end with the first attempt's
// error (README, Pushback: one longer than the call's time left ends the
// retries), as for a RetryInfo of 293 years, instead of the policy's three
// attempts at its backoff.
func TestAttack19RetryInfoPastProtobufsRangeEndsTheRetries(t *testing.T) {
	for _, seconds := range []int64{math.MaxInt64/int64(time.Second) + 1, 315576000001} {
		srv, cc := start(t, func(context.Context, server.Call) error {
			st, _ := status.New(codes.Unavailable, "busy").WithDetails([]protoadapt.MessageV1{&errdetails.RetryInfo{RetryDelay: retryIn(seconds, 0).(*errdetails.RetryInfo).RetryDelay}}...)
			return st.Err()
		})
		rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(3)}}})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		_, err := callGetStock(ctx, rt, cc)
		cancel()
		if status.Code(err) != codes.Unavailable || time.Since(start) > time.Second {
			t.Errorf("RetryInfo of %d s: %v after %v; want UNAVAILABLE at once", seconds, err, time.Since(start))
		}
		if n := srv.Calls(getStock); n != 1 {
			t.Errorf("RetryInfo of %d s: the server saw %d attempts, want 1 (the wait outlasts the call)", seconds, n)
		}
	}
}
