package policy_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestDedupFinalCodesRefusesTheCallersEnding: a dedup keeps as a
// request's outcome neither CANCELLED nor DEADLINE_EXCEEDED, the ending
// of a request whose caller cancelled it or whose deadline passed: kept,
// it would be replayed to every retry of the key for the whole TTL. The
// refusal names the method's field and says why; answers of the service,
// and a transient code a service chooses to keep, are accepted.
func TestDedupFinalCodesRefusesTheCallersEnding(t *testing.T) {
	withFinal := func(cs policy.CodeSet) error {
		p := policy.Server{Name: "r.Orders", Methods: []policy.ServerMethod{{Name: "/r.Orders/Place",
			Dedup: &policy.Dedup{TTL: time.Hour, FinalCodes: cs}, NewResponse: func() proto.Message { return new(emptypb.Empty) }}}}
		return p.Validate()
	}
	const field = "resilient/server: r.Orders: Methods[0] (/r.Orders/Place).Dedup.FinalCodes: "
	for _, tc := range []struct {
		name string
		cs   policy.CodeSet
		want []string // every one in the error; none for no error
	}{
		{"the default", 0, nil},
		{"answers", policy.CodesOf(codes.NotFound, codes.FailedPrecondition), nil},
		{"a transient code the service keeps", policy.DefaultFinalCodes | policy.CodesOf(codes.Unavailable, codes.Aborted), nil},
		{"CANCELLED", policy.DefaultFinalCodes | policy.CodesOf(codes.Canceled),
			[]string{field + "holds CANCELLED, which ends a request whose caller cancelled it or whose deadline passed", "replayed to every retry of the key for the whole TTL", "list only answers of the service"}},
		{"DEADLINE_EXCEEDED", policy.CodesOf(codes.NotFound, codes.DeadlineExceeded),
			[]string{field + "holds DEADLINE_EXCEEDED, which ends", "the handler never run again"}},
		{"both", policy.CodesOf(codes.Canceled, codes.DeadlineExceeded),
			[]string{field + "holds [CANCELLED DEADLINE_EXCEEDED], which end a request"}},
		{"a number gRPC has no code for", policy.CodeSet(1 << 20),
			[]string{field + "holds", "numbers gRPC defines no code for"}},
		{"OK", policy.CodesOf(codes.OK), []string{field + "OK is not an error code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := withFinal(tc.cs)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("FinalCodes %v refused: %v", tc.cs, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("FinalCodes %v accepted, want it refused", tc.cs)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to hold %q", err, w)
				}
			}
		})
	}
}
