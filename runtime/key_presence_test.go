package runtime_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime"
)

// A cache key field with presence set to its zero value and one left
// unset are two keys; a set field's key differs from every unset one,
// whatever its value; joined with other parts, they stay apart.
func TestKeyIfSetTellsUnsetFromZero(t *testing.T) {
	fd := (&resilientv1.Retry{}).ProtoReflect().Descriptor().Fields().ByName("max_attempts")
	if !fd.HasPresence() {
		t.Fatal("max_attempts has no presence: pick another field for this test")
	}
	part := func(m *resilientv1.Retry) string {
		return runtime.KeyIfSet(m, fd.Number(), runtime.KeyFromUint(uint64(m.GetMaxAttempts())))
	}
	unset, zero, three := part(&resilientv1.Retry{}), part(&resilientv1.Retry{MaxAttempts: proto.Uint32(0)}), part(&resilientv1.Retry{MaxAttempts: proto.Uint32(3)})
	if unset == zero || unset == three || zero == three {
		t.Errorf("unset %q, zero %q, three %q: want three different keys", unset, zero, three)
	}
	if a, b := runtime.JoinKey(unset, "x"), runtime.JoinKey(zero, "x"); a == b {
		t.Errorf("joined: unset and zero both give %q", a)
	}
	// A number the message has no field for counts as unset, never panics.
	if got := runtime.KeyIfSet(&resilientv1.Retry{}, 999, "v"); got != "" {
		t.Errorf("unknown field number: %q, want the unset key", got)
	}
}
