package adaptive

import (
	"testing"
	"time"
)

// TestAttack30fBaselineFollowsAFasterDependencyDown: rounds of 40 ms every
// 10 ms for 60 s, then the dependency becomes permanently faster (10 ms).
// The baseline must follow it down once the current bucket holds 16 rounds
// of it (well within one 3 s bucket), and stay there: no anchor or frozen
// bucket reading may hold it at 40 ms.
func TestAttack30fBaselineFollowsAFasterDependencyDown(t *testing.T) {
	b := newBaseline(int64(30 * time.Second))
	now := int64(0)
	for ; now < int64(60*time.Second); now += int64(10 * time.Millisecond) {
		b.observe(now, int64(40*time.Millisecond))
	}
	if got := b.at(now / b.width); got != int64(40*time.Millisecond) {
		t.Fatalf("baseline %v after 60 s of 40 ms rounds, want 40ms", time.Duration(got))
	}
	switched := now
	var got int64
	for ; now < switched+int64(90*time.Second); now += int64(10 * time.Millisecond) {
		got = b.observe(now, int64(10*time.Millisecond))
		if now >= switched+int64(time.Second) && got != int64(10*time.Millisecond) {
			t.Fatalf("baseline %v %v after the dependency became 10 ms, want 10ms", time.Duration(got), time.Duration(now-switched))
		}
	}
}
