package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func sent(ctx context.Context) []string {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md.Get(runtime.PriorityHeader)
}

// TestPrioritizeNeverRaises: the annotated priority is sent unless the
// caller already sends one as low or lower; none is sent without one.
func TestPrioritizeNeverRaises(t *testing.T) {
	c, err := runtime.NewClient(&policy.Service{Name: "pkg.Svc", Methods: []policy.Method{
		{Name: "/pkg.Svc/Order", Priority: policy.PriorityHigh},
		{Name: "/pkg.Svc/Plain"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	order, plain := c.Method(0), c.Method(1)
	bg := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		m    *runtime.Method
		want string
	}{
		{"annotated", bg, order, "[high]"},
		{"lowered by the caller", runtime.WithPriority(bg, policy.PriorityLow), order, "[low]"},
		{"same as the caller's", runtime.WithPriority(bg, policy.PriorityHigh), order, "[high]"},
		{"caller asks for more", runtime.WithPriority(bg, policy.PriorityCritical), order, "[critical high]"},
		{"unknown value sent", metadata.AppendToOutgoingContext(bg, runtime.PriorityHeader, "urgent"), order, "[urgent high]"},
		{"no annotation", bg, plain, "[]"},
		{"nil method", bg, nil, "[]"},
	} {
		if got := fmt.Sprint(sent(runtime.Prioritize(tc.ctx, tc.m))); got != tc.want {
			t.Errorf("%s: sent %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPriorityNames(t *testing.T) {
	for p, want := range map[policy.Priority]string{policy.PriorityUnspecified: "unspecified", policy.PriorityLow: "low",
		policy.PriorityNormal: "normal", policy.PriorityHigh: "high", policy.PriorityCritical: "critical", 9: "Priority(9)"} {
		if got := p.String(); got != want {
			t.Errorf("Priority(%d).String() = %q, want %q", uint8(p), got, want)
		}
	}
	for p, want := range map[policy.Priority]string{policy.PriorityUnspecified: "[normal]", 9: "[normal]", policy.PriorityLow: "[low]"} {
		if got := fmt.Sprint(sent(runtime.WithPriority(context.Background(), p))); got != want {
			t.Errorf("WithPriority(%d) sent %s, want %s", uint8(p), got, want)
		}
	}
}

// A batch job lowers the priority of everything it calls: the generated
// clients then send "low" whatever their methods' annotations say.
func ExampleWithPriority() {
	ctx := runtime.WithPriority(context.Background(), policy.PriorityLow)
	md, _ := metadata.FromOutgoingContext(ctx)
	fmt.Println(md.Get(runtime.PriorityHeader))
	// Output: [low]
}
