package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestSheddingOrderUnderBurst holds requests in the handler and sends
// bursts of each priority: the cumulative limits (low 2, normal 4, high 6,
// critical 8) decide who gets in.
func TestSheddingOrderUnderBurst(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
	p := inventoryPolicy()
	p.Methods[0].Priority = PriorityCritical // the caller lowers it with the header
	g, client, _ := guarded(t, srv, []*policy.Server{p})

	type result struct {
		prio Priority
		err  error
	}
	results := make(chan result, 64)
	var wg sync.WaitGroup
	send := func(prio Priority, n int) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := runtime.WithPriority(ctxTimeout(t, 5*time.Second), prio)
				_, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: prio.String()})
				results <- result{prio, err}
			}()
		}
	}
	inFlight := func(n int) func() bool { return func() bool { return stats(t, g).InFlight == n } }
	// One wave per priority, lowest first, each waiting for the previous
	// to be admitted, so the order is known: 5 low (2 fit), 5 normal (2
	// more fit: 4), 5 high (2 more: 6), 5 critical (2 more: 8).
	wantShed := map[Priority]int{}
	for i, prio := range []Priority{PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical} {
		send(prio, 5)
		wantShed[prio] = 3
		eventually(t, "wave admitted", func() bool {
			s := stats(t, g)
			return s.InFlight == 2*(i+1) && s.Shed[prio] == 3
		})
	}
	// Every refusal came back at once, while the admitted were still held.
	for range 12 {
		r := <-results
		if status.Code(r.err) != codes.Unavailable {
			t.Fatalf("%s request: %v, want UNAVAILABLE while held", r.prio, r.err)
		}
		d, ok := runtime.Pushback(r.err, nil)
		if !ok || d != 250*time.Millisecond {
			t.Errorf("refusal's pushback %s %v, want 250ms", d, ok)
		}
	}
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Errorf("admitted %s request: %v", r.prio, r.err)
		}
	}
	s := stats(t, g)
	for prio, n := range wantShed {
		if s.Shed[prio] != uint64(n) || s.Admitted[prio] != 2 {
			t.Errorf("%s: admitted %d shed %d, want 2 and %d", prio, s.Admitted[prio], s.Shed[prio], n)
		}
	}
	eventually(t, "every place given back", inFlight(0))
	if n := srv.getCalls.Load(); n != 8 {
		t.Errorf("handler ran %d times, want 8", n)
	}
}

// TestPriorityCannotBeRaised: a caller asking for critical gets at most
// the method's annotation (WatchStock: low).
func TestPriorityCannotBeRaised(t *testing.T) {
	cases := []struct {
		annotated Priority
		sent      []string
		want      Priority
	}{
		{PriorityLow, []string{"critical"}, PriorityLow},
		{PriorityHigh, []string{"low"}, PriorityLow},
		{PriorityHigh, nil, PriorityHigh},
		{PriorityUnspecified, nil, PriorityNormal},
		{PriorityHigh, []string{"bogus"}, PriorityHigh},
		{PriorityCritical, []string{"high", "normal"}, PriorityNormal},
	}
	for _, c := range cases {
		md := metadata.MD{}
		if c.sent != nil {
			md[PriorityHeader] = c.sent
		}
		if got := effectivePriority(md, c.annotated); got != c.want {
			t.Errorf("annotated %s, sent %v: got %s, want %s", c.annotated, c.sent, got, c.want)
		}
	}
}

// TestShedResourceExhausted: the refusal code is the policy's.
func TestShedResourceExhausted(t *testing.T) {
	srv := &inventoryServer{}
	hold := make(chan struct{})
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		<-hold
		return &inventoryv1.GetStockResponse{}, nil
	}
	p := inventoryPolicy()
	p.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}, Code: codes.ResourceExhausted}
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	done := make(chan error, 1)
	go func() {
		_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
		done <- err
	}()
	eventually(t, "first admitted", func() bool { return stats(t, g).InFlight == 1 })
	_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second: %v, want RESOURCE_EXHAUSTED", err)
	}
	if d, _ := runtime.Pushback(err, nil); d != policy.DefaultShedPushback {
		t.Errorf("pushback %s, want the default %s", d, policy.DefaultShedPushback)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestPlaceGivenBackWhenHandlerNeverRuns: a request admitted by the tap
// that fails before the interceptor (a message that does not decode, a
// method in the policy that the server does not register) still gives its
// place back.
func TestPlaceGivenBackWhenHandlerNeverRuns(t *testing.T) {
	srv := &inventoryServer{}
	p := inventoryPolicy()
	p.Methods = append(p.Methods, policy.ServerMethod{Name: "/" + inventory + "/NotServed"})
	g, _, cc := guarded(t, srv, []*policy.Server{p})

	// Field 1 of GetStockRequest is a string: invalid UTF-8 does not decode.
	bad := wrapperspb.Bytes([]byte{0xff, 0xfe})
	for range 10 {
		err := cc.Invoke(ctxTimeout(t, time.Second), getStock, bad, new(inventoryv1.GetStockResponse))
		if status.Code(err) != codes.Internal {
			t.Fatalf("undecodable request: %v, want INTERNAL", err)
		}
		err = cc.Invoke(ctxTimeout(t, time.Second), "/"+inventory+"/NotServed", new(inventoryv1.GetStockRequest), new(inventoryv1.GetStockResponse))
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("unregistered method: %v, want UNIMPLEMENTED", err)
		}
	}
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	if s := stats(t, g); s.Admitted[PriorityHigh]+s.Admitted[PriorityNormal] != 20 {
		t.Errorf("admitted %v, want 20 in all", s.Admitted)
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
}

// TestInterceptorsAloneStillShed: without the tap (a server with its own
// InTapHandle that forgot to call TapHandle), the interceptor sheds after
// decoding, and can then send the pushback trailer too.
func TestInterceptorsAloneStillShed(t *testing.T) {
	srv := &inventoryServer{}
	hold := make(chan struct{})
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		<-hold
		return &inventoryv1.GetStockResponse{}, nil
	}
	p := inventoryPolicy()
	p.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	cc := dial(t, serve(t, srv, grpc.ChainUnaryInterceptor(g.UnaryInterceptor)))
	client := inventoryv1.NewInventoryServiceClient(cc)
	done := make(chan error, 1)
	go func() {
		_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
		done <- err
	}()
	eventually(t, "first admitted", func() bool { return stats(t, g).InFlight == 1 })
	_, err = client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("second: %v, want UNAVAILABLE", err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Error(err)
	}
	eventually(t, "place given back", func() bool { return stats(t, g).InFlight == 0 })
}
