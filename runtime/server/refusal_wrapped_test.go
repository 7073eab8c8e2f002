package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// statusWrapper is an error that wraps another and has a status of its
// own: the wrapped error's, its message prefixed, details and all (as an
// interceptor that adds context to a status error would).
type statusWrapper struct{ err error }

func (w *statusWrapper) Error() string { return "wrapped: " + w.err.Error() }
func (w *statusWrapper) Unwrap() error { return w.err }
func (w *statusWrapper) GRPCStatus() *status.Status {
	p := status.Convert(w.err).Proto()
	p.Message = "wrapped: " + p.Message
	return status.FromProto(p)
}

// TestRefusalWrappedBetweenTwoGuardsKeepsItsMark: two Guards on one
// server, the inner one shedding every request but one, and an
// interceptor of the server's own between them that wraps the errors it
// passes on (fmt.Errorf with %w, or an error type with a status of its
// own that unwraps to the one it wraps). The inner Guard's shed refusal
// is this server's, wrapped or not: the outer Guard passes it on with its
// SHED mark and its pushback, and the wrapper's words, rather than taking
// the mark out as from a dependency's refusal.
func TestRefusalWrappedBetweenTwoGuardsKeepsItsMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(error) error
	}{
		{"fmt.Errorf", func(err error) error { return fmt.Errorf("wrapped: %w", err) }},
		{"status wrapper", func(err error) error { return &statusWrapper{err: err} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &inventoryServer{}
			g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			p2 := inventoryPolicy()
			p2.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
			g2, err := NewGuard([]*policy.Server{p2}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			release, running := make(chan struct{}), make(chan struct{}, 1)
			srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				running <- struct{}{}
				<-release
				return &inventoryv1.GetStockResponse{}, nil
			}
			wrapping := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if err != nil {
					err = tc.wrap(err)
				}
				return resp, err
			}
			opts := append(g1.ServerOptions(), grpc.ChainUnaryInterceptor(wrapping, g2.UnaryInterceptor))
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
			first := make(chan error, 1)
			go func() {
				_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
				first <- err
			}()
			<-running
			_, err = client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{})
			close(release)
			if err := <-first; err != nil {
				t.Fatalf("first request: %v", err)
			}
			if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
				t.Fatalf("second request: %v (reasons %v), want UNAVAILABLE marked %s", err, reasons(err), runtime.ShedReason)
			}
			if msg := status.Convert(err).Message(); len(msg) < 9 || msg[:9] != "wrapped: " {
				t.Errorf("message %q, want the wrapper's words first", msg)
			}
			if d, ok := runtime.Pushback(err, nil); !ok || d != p2.Shedding.Pushback {
				t.Errorf("pushback %v %v, want %v", d, ok, p2.Shedding.Pushback)
			}
			if n := srv.getCalls.Load(); n != 1 {
				t.Errorf("GetStock ran %d times, want 1", n)
			}
		})
	}
}
