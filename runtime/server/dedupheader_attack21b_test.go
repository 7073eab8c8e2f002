package server

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack21bDedupHeaderEveryRequestCarries: Dedup.Header names the
// metadata key the idempotency key is read from. NewGuard used to accept
// any lower-case key but grpc-… and …-bin, so a policy written by hand
// (or edited) with a key every request carries, the same for every
// request of a caller or of every caller (user-agent, content-type, te,
// :authority, the priority header), had every request share one key: the
// first ran, every other was refused as "a different request" or, with
// the same body, answered the first's outcome, never running. And a key
// gRPC cannot carry (a space, an upper-case letter) never arrives, so
// nothing is deduplicated. NewGuard must refuse both, naming the field.
func TestAttack21bDedupHeaderEveryRequestCarries(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"user-agent", "every request"},
		{"content-type", "every request"},
		{"te", "every request"},
		{":authority", "every request"},
		{"authorization", "every request"},
		{"cookie", "every request"},
		{"x-forwarded-for", "every request"},
		{"resilient-priority", "every request"},
		{"x idem", "not a valid text metadata key"},
		{"x/idem", "not a valid text metadata key"},
		{"Idem-Key", "not a valid text metadata key"},
		{"grpc-idem", "not a valid text metadata key"},
		{"idem-bin", "not a valid text metadata key"},
	} {
		p := inventoryPolicy()
		p.Methods[1].Dedup.Header = tc.header
		_, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
		if err == nil {
			t.Errorf("Dedup.Header %q: NewGuard accepted it, want a refusal", tc.header)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `Dedup.Header: "`+tc.header+`"`) || !strings.Contains(msg, tc.want) {
			t.Errorf("Dedup.Header %q: %v, want it named and %q", tc.header, err, tc.want)
		}
	}
	for _, ok := range []string{"x-idempotency-key", "idem_key", "idem.key", "0key"} {
		p := inventoryPolicy()
		p.Methods[1].Dedup.Header = ok
		if _, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10))); err != nil {
			t.Errorf("Dedup.Header %q: %v, want it accepted", ok, err)
		}
	}
}
