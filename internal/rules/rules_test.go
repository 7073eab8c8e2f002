package rules

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

func problemsOf(p *resilientv1.Policy, onMethod bool) []string {
	var got []string
	Check(p, onMethod, func(path, format string, args ...any) {
		got = append(got, path+": "+fmt.Sprintf(format, args...))
	})
	return got
}

func TestCheckNamesThePathAndTheMend(t *testing.T) {
	p := &resilientv1.Policy{
		Timeout:     &durationpb.Duration{Seconds: -1},
		Retry:       &resilientv1.Retry{MaxAttempts: proto.Uint32(0), RetryableCodes: []string{"NOT_FOUND", "unavailable"}},
		RetryBudget: &resilientv1.RetryBudget{Ratio: proto.Float64(2)},
	}
	got := strings.Join(problemsOf(p, true), "\n")
	for _, want := range []string{
		"timeout: must be positive, got -1s",
		"retry.max_attempts: must be at least 1, got 0",
		`retry.retryable_codes[0]: "NOT_FOUND" is an answer of the service`,
		`retry.retryable_codes[1]: unknown status code "unavailable": did you mean "UNAVAILABLE"?`,
		"retry_budget: retry_budget is shared by the whole dependency",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one containing %q", got, want)
		}
	}
	if got := problemsOf(&resilientv1.Policy{RetryBudget: &resilientv1.RetryBudget{Ratio: proto.Float64(2)}}, false); len(got) != 1 || !strings.HasPrefix(got[0], "retry_budget.ratio: must be in (0, 1]") {
		t.Errorf("service-level budget: %q", got)
	}
}

func TestCheckDurationLimits(t *testing.T) {
	for _, tc := range []struct {
		d   *durationpb.Duration
		bad string
	}{
		{&durationpb.Duration{Seconds: math.MaxInt64 / 2}, "292 years"},
		{&durationpb.Duration{Seconds: maxSeconds - 1, Nanos: 999999999}, ""},
		// The longest and the shortest Duration fit; a nanosecond past either does not.
		{&durationpb.Duration{Seconds: maxSeconds, Nanos: maxNanos}, ""},
		{&durationpb.Duration{Seconds: maxSeconds}, ""},
		{&durationpb.Duration{Seconds: maxSeconds, Nanos: maxNanos + 1}, "9223372036 seconds and 854775808 nanos is more than a Go time.Duration holds"},
		{&durationpb.Duration{Seconds: maxSeconds + 1}, "9223372037 seconds is more than a Go time.Duration holds"},
		{&durationpb.Duration{Seconds: -maxSeconds, Nanos: -maxNanos - 1}, "timeout: must be positive, got -2562047h47m16.854775808s"},
		{&durationpb.Duration{Seconds: -maxSeconds, Nanos: -maxNanos - 2}, "-9223372036 seconds and -854775809 nanos is more than a Go time.Duration holds"},
		{&durationpb.Duration{Seconds: -maxSeconds - 1}, "-9223372037 seconds is more than"},
		{&durationpb.Duration{Nanos: 1}, ""},
		{&durationpb.Duration{Seconds: 1, Nanos: -1}, "same sign"},
		{&durationpb.Duration{Nanos: 1e9}, "±999999999"},
	} {
		got := problemsOf(&resilientv1.Policy{Timeout: tc.d}, true)
		if (tc.bad == "") != (len(got) == 0) || (tc.bad != "" && !strings.Contains(got[0], tc.bad)) {
			t.Errorf("%v: problems %q, want one containing %q", tc.d, got, tc.bad)
		}
	}
}

func TestCodesOfDropsRepeatsAndDefaults(t *testing.T) {
	if got := CodesOf(nil, []codes.Code{codes.Unavailable, codes.DeadlineExceeded}); len(got) != 2 {
		t.Errorf("CodesOf(nil) = %v", got)
	}
	if got := CodesOf([]string{"UNAVAILABLE", "UNAVAILABLE", "OK"}, nil); len(got) != 2 {
		t.Errorf("CodesOf = %v", got)
	}
	_ = time.Second
}
