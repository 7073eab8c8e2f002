package runtime_test

import (
	"testing"

	"github.com/go-resilient/resilient/runtime"
)

// TestAttackR18BCacheKeysNeverCollide: the generated cache key of a
// method with several key fields is JoinKey of the fields, each read as
// text (KeyFromInt, KeyFromUint, KeyFromBytes, a string as it is). Two
// requests that differ in any key field must get different keys, whatever
// the values hold: separators, digits that look like lengths, an empty
// string beside a 0 (both read as ""), bytes whose base64 looks like a
// string of the other field.
func TestAttackR18BCacheKeysNeverCollide(t *testing.T) {
	strs := []string{"", "0", "1", ":", "1:", "0:", "1:a", "a", "a1:", "10:aaaaaaaaaa", "\x00", "é", "YQ"}
	ints := []int64{0, 1, -1, 10, 1 << 62, -1 << 63}
	bytes := [][]byte{nil, {}, {0}, {'a'}, {0xff, 0xfe}}
	type req struct {
		s  string
		i  int64
		u  uint32
		b  string // the bytes, as a map key
		s2 string
	}
	seen := map[string]req{}
	for _, s := range strs {
		for _, i := range ints {
			for _, u := range []uint32{0, 1, 1 << 31} {
				for _, b := range bytes {
					for _, s2 := range strs {
						r := req{s, i, u, string(b), s2}
						key := runtime.JoinKey(s, runtime.KeyFromInt(i), runtime.KeyFromUint(uint64(u)), runtime.KeyFromBytes(b), s2)
						if prev, ok := seen[key]; ok && prev != r {
							t.Fatalf("requests %+v and %+v share the cache key %q", prev, r, key)
						}
						seen[key] = r
					}
				}
			}
		}
	}
	// nil and empty bytes are the same field value in proto3: one key.
	if runtime.KeyFromBytes(nil) != runtime.KeyFromBytes([]byte{}) {
		t.Error("nil and empty bytes, the same proto3 value, get different keys")
	}
}
