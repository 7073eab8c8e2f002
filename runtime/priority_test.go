package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
)

func sent(ctx context.Context) []string {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md.Get(runtime.PriorityHeader)
}

// TestPrioritizeNeverRaises: the annotated priority is sent unless the
// caller already sends one as low or lower; none is sent without one.
func TestPrioritizeNeverRaises(t *testing.T) {
	c, err := runtime.NewClient(&runtime.ServicePolicy{Name: "pkg.Svc", Methods: []runtime.MethodPolicy{
		{Name: "/pkg.Svc/Order", Priority: runtime.PriorityHigh},
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
		{"lowered by the caller", runtime.WithPriority(bg, runtime.PriorityLow), order, "[low]"},
		{"same as the caller's", runtime.WithPriority(bg, runtime.PriorityHigh), order, "[high]"},
		{"caller asks for more", runtime.WithPriority(bg, runtime.PriorityCritical), order, "[critical high]"},
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
	for p := runtime.PriorityLow; p <= runtime.PriorityCritical; p++ {
		if q, ok := runtime.ParsePriority(p.String()); !ok || q != p {
			t.Errorf("ParsePriority(%q) = %v, %v", p, q, ok)
		}
	}
	if _, ok := runtime.ParsePriority("unspecified"); ok {
		t.Error(`"unspecified" parsed`)
	}
	if got := runtime.Priority(9).OrNormal(); got != runtime.PriorityNormal {
		t.Errorf("Priority(9).OrNormal() = %v", got)
	}
	if got, ok := runtime.OutgoingPriority(context.Background()); ok {
		t.Errorf("OutgoingPriority of a bare context = %v", got)
	}
}

// A batch job lowers the priority of everything it calls: the generated
// clients then send "low" whatever their methods' annotations say.
func ExampleWithPriority() {
	ctx := runtime.WithPriority(context.Background(), runtime.PriorityLow)
	p, _ := runtime.OutgoingPriority(ctx)
	fmt.Println(p)
	// Output: low
}
