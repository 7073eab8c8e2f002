package server

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25fASecondTapPanicsInNewServer: the README said gRPC "keeps
// the last" InTapHandle given, so that a server with a tap of its own
// could pass it after ServerOptions. It does not: gRPC takes one and
// panics in NewServer at a second ("The tap handle was already set"),
// whichever order. A server with its own tap passes the Guard's
// interceptors instead of ServerOptions, and its tap calls TapHandle
// (TestAttackR18bOwnTapHandle).
func TestAttack25fASecondTapPanicsInNewServer(t *testing.T) {
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	own := func(ctx context.Context, info *tap.Info) (context.Context, error) { return g.TapHandle(ctx, info) }
	for name, opts := range map[string][]grpc.ServerOption{
		"own tap after ServerOptions":  append(g.ServerOptions(), grpc.InTapHandle(own)),
		"own tap before ServerOptions": append([]grpc.ServerOption{grpc.InTapHandle(own)}, g.ServerOptions()...),
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: grpc.NewServer took two InTapHandles; the README says it panics", name)
				} else if s := fmt.Sprint(r); s != "The tap handle was already set and may not be reset." {
					t.Errorf("%s: panicked with %q", name, s)
				}
			}()
			grpc.NewServer(opts...).Stop()
		}()
	}
}
