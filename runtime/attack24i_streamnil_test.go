package runtime_test

// Attack 24i on "a server stream's nil request ends it" (Conn's SendMsg):
// hand-written code holding the stream after the nil was refused.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestAttack24iAServerStreamEndedByANilRequestSendsNothingAfter: the
// stream a nil request ended gave its permit back; code that holds it
// (opened through Conn.NewStream by hand) and sends a real request after
// must not reach the server on a stream that holds no permit: the send or
// the read fails, nothing more is counted, and the next stream takes the
// method's one permit and is served.
func TestAttack24iAServerStreamEndedByANilRequestSendsNothingAfter(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	rt, conn, reg := atk24eClient(t, cc, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := conn.NewStream(ctx, &atk24eWatchDesc, atk24eWatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg((*wrapperspb.StringValue)(nil)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a nil request: %v, want INVALID_ARGUMENT", err)
	}
	atkWantNoPermits(t, rt, atk24eWatch, "after the nil request ended the stream")
	// The stream was opened, then ended by the client: one attempt, the
	// client's fault, as a request that does not marshal is counted.
	if got := atk24eAttempts(t, reg, atk24eWatch); len(got) != 1 || got["INVALID_ARGUMENT"] != 1 {
		t.Errorf("attempts_total %v after the nil request, want one INVALID_ARGUMENT", got)
	}
	sendErr := cs.SendMsg(wrapperspb.String("ok"))
	_ = cs.CloseSend()
	recvErr := cs.RecvMsg(new(wrapperspb.StringValue))
	if sendErr == nil && recvErr == nil {
		t.Fatalf("the ended stream sent a request and read an answer, holding no permit")
	}
	if got := atk24eAttempts(t, reg, atk24eWatch); len(got) != 1 || got["INVALID_ARGUMENT"] != 1 {
		t.Errorf("attempts_total %v after the ended stream was used, want the nil's one INVALID_ARGUMENT alone", got)
	}
	// The method's one permit is free: the next stream is served.
	cs2, err := conn.NewStream(ctx, &atk24eWatchDesc, atk24eWatch)
	if err != nil {
		t.Fatalf("the next stream: %v", err)
	}
	if err := cs2.SendMsg(wrapperspb.String("ok")); err != nil {
		t.Fatal(err)
	}
	if err := cs2.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for cs2.RecvMsg(new(wrapperspb.StringValue)) == nil {
		n++
	}
	if n != 3 {
		t.Errorf("the next stream read %d messages, want 3", n)
	}
	atkWantNoPermits(t, rt, atk24eWatch, "after the next stream's end")
	if got := atk24eAttempts(t, reg, atk24eWatch); len(got) != 2 || got["OK"] != 1 {
		t.Errorf("attempts_total %v, want the next stream's one OK besides the nil's", got)
	}
}
