package policy_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestStreamWithANamedKeyIsRefused: a stream's handle reads no key, so a
// Go policy that names a key field on a streaming method (which the
// plugin refuses in a .proto) is refused too, as a generated key is,
// rather than silently never sent.
func TestStreamWithANamedKeyIsRefused(t *testing.T) {
	for _, k := range []policy.Kind{policy.KindClientStreaming, policy.KindServerStreaming, policy.KindBidiStreaming} {
		p := policy.Service{Name: "r.Orders", Methods: []policy.Method{{Name: "/r.Orders/Upload", Kind: k, IdempotencyKey: "order_id"}}}
		err := p.Validate()
		want := "Methods[0] (/r.Orders/Upload).IdempotencyKey: only unary calls send an idempotency key, and Upload is a"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("kind %d: %v, want an error holding %q", k, err, want)
		}
	}
	p := policy.Service{Name: "r.Orders", Methods: []policy.Method{{Name: "/r.Orders/Place", IdempotencyKey: "order_id"}}}
	if err := p.Validate(); err != nil {
		t.Errorf("a unary method with a key: %v", err)
	}
}
