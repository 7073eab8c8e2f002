package priority

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestNamesRoundTrip(t *testing.T) {
	for p := Low; p <= Critical; p++ {
		name, ok := Name(p)
		if !ok {
			t.Fatalf("Name(%d) refused", p)
		}
		if q, ok := Parse(name); !ok || q != p {
			t.Errorf("Parse(%q) = %v, %v, want %d", name, q, ok, p)
		}
	}
	if _, ok := Parse("unspecified"); ok {
		t.Error(`"unspecified" parsed`)
	}
	if _, ok := Name(9); ok {
		t.Error("Name(9) accepted")
	}
	if got := OrNormal(9); got != Normal {
		t.Errorf("OrNormal(9) = %d, want Normal", got)
	}
	if got := OrNormal(Unspecified); got != Normal {
		t.Errorf("OrNormal(Unspecified) = %d, want Normal", got)
	}
}

func TestOutgoingIsTheLowestKnownValue(t *testing.T) {
	if got, ok := Outgoing(context.Background()); ok {
		t.Errorf("Outgoing of a bare context = %d", got)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), Header, "high", Header, "urgent", Header, "low")
	if got, ok := Outgoing(ctx); !ok || got != Low {
		t.Errorf("Outgoing = %d, %v, want Low", got, ok)
	}
	ctx = metadata.AppendToOutgoingContext(context.Background(), Header, "urgent")
	if got, ok := Outgoing(ctx); ok {
		t.Errorf("Outgoing of an unknown value = %d, want none", got)
	}
}

func TestLowestNeverRaises(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		ceiling uint8
		want    uint8
	}{
		{nil, Unspecified, Normal},
		{nil, High, High},
		{[]string{"critical"}, High, High},
		{[]string{"low"}, High, Low},
		{[]string{"urgent", "normal"}, Critical, Normal},
	} {
		if got := Lowest(tc.values, tc.ceiling); got != tc.want {
			t.Errorf("Lowest(%q, %d) = %d, want %d", tc.values, tc.ceiling, got, tc.want)
		}
	}
}
