package runtime_test

// Attack on the README's Streams ("Its outcome … classified as a unary
// attempt is") and on "the error code the caller sees" for a server
// stream the server refuses at once, before reading its request (a
// server interceptor: the Guard's shedding or deadline check, an auth
// check), whose trailers-only answer arrives before the client sends the
// request (a loaded client: here a client interceptor that takes 100 ms
// before each SendMsg). Had SendMsg returned io.EOF there, the plain
// generated method would return (nil, io.EOF): no stream to read the
// status from, an error of code UNKNOWN, and an outcome never told. It
// held: gRPC's SendMsg answers nil on a stream that sends one message,
// and the status comes from Recv.

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
)

// atk24eSlowSend is a client stream interceptor whose streams wait d
// before each SendMsg.
func atk24eSlowSend(d time.Duration) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &atk24eSlowStream{ClientStream: cs, d: d}, nil
	}
}

type atk24eSlowStream struct {
	grpc.ClientStream
	d time.Duration
}

func (s *atk24eSlowStream) SendMsg(m any) error {
	time.Sleep(s.d)
	return s.ClientStream.SendMsg(m)
}

func TestAttack24eServerStreamRefusedBeforeItsRequestTellsItsStatus(t *testing.T) {
	atkNoLeak(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The server refuses every stream in an interceptor, at once, without
	// reading the request.
	gs := grpc.NewServer(grpc.StreamInterceptor(func(any, grpc.ServerStream, *grpc.StreamServerInfo, grpc.StreamHandler) error {
		return status.Error(codes.Unavailable, "refused at the door")
	}))
	w := atk24eWatchDesc
	w.Handler = atk24eServe("watch")
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk24e.S", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{w}}, struct{}{})
	cc := serveAndDial(t, gs, lis, grpc.WithStreamInterceptor(atk24eSlowSend(100*time.Millisecond)))
	rt, conn, reg := atk24eClient(t, cc, time.Hour)

	// The plain generated server-streaming method, as protoc-gen-go-grpc
	// writes it.
	watch := func(ctx context.Context, in *wrapperspb.StringValue) (grpc.ServerStreamingClient[wrapperspb.StringValue], error) {
		stream, err := conn.NewStream(ctx, &atk24eWatchDesc, atk24eWatch)
		if err != nil {
			return nil, err
		}
		x := &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: stream}
		if err := x.ClientStream.SendMsg(in); err != nil {
			return nil, err
		}
		if err := x.ClientStream.CloseSend(); err != nil {
			return nil, err
		}
		return x, nil
	}
	st, err := watch(context.Background(), wrapperspb.String("ok"))
	if err == nil {
		_, err = st.Recv()
	}
	if err == io.EOF || status.Code(err) != codes.Unavailable {
		t.Errorf("the caller saw %v (code %v), want the server's UNAVAILABLE", err, status.Code(err))
	}
	if n := atkInUse(t, rt, atk24eWatch); n != 0 {
		t.Errorf("%d permits taken after the refusal", n)
	}
	// Told at once, as a unary refusal is: the caller has nothing left to
	// read it from, and its context lives on (an hour's timeout).
	if got := atk24eAttempts(t, reg, atk24eWatch); len(got) != 1 || got["UNAVAILABLE"] != 1 {
		t.Errorf("attempts_total %v, want one under UNAVAILABLE at once", got)
	}
	atkWantBreaker(t, rt, atk24eWatch, runtime.StateOpen, "breaker %v after the dependency's UNAVAILABLE, want open (one failure opens it)")
}
