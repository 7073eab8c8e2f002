package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackValidateStreamRateLimit: the plugin refuses a rate limit of
// its own on a stream (opening a stream takes no token); Validate, which
// applies the same rules to a policy edited in Go or by an override, must
// refuse it too instead of showing a limit that does nothing.
func TestAttackValidateStreamRateLimit(t *testing.T) {
	p := validPolicy()
	p.Methods[2].RateLimit = &policy.RateLimit{RequestsPerSecond: 1, Burst: 1, MaxWait: time.Millisecond}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), watch+".RateLimit: opening a stream takes no token, and Watch is a streaming method: remove its rate limit") {
		t.Errorf("a stream's own rate limit gave %v", err)
	}
}
