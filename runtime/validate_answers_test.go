package runtime

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// The plugin refuses an answer listed as retryable; so does Validate, for a
// policy edited in Go or by an override.
func TestValidateRefusesAnswersAsRetryable(t *testing.T) {
	p := &policy.Service{Name: "s", Methods: []policy.Method{{Name: "/s/M", Idempotent: true,
		Retry: &policy.Retry{MaxAttempts: 2, InitialBackoff: 1, MaxBackoff: 1, Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable, codes.NotFound)}}}}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), "RetryableCodes: holds [NOT_FOUND], answers of the service") {
		t.Fatalf("Validate() = %v, want NOT_FOUND refused as retryable", err)
	}
}
