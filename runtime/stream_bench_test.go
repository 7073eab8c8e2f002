package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc"
)

// quietStream is a grpc.ClientStream whose calls return at once: what the
// runtime's wrapper adds to each call is what is measured.
type quietStream struct{ grpc.ClientStream }

func (quietStream) RecvMsg(any) error { return nil }
func (quietStream) SendMsg(any) error { return nil }

// BenchmarkStreamRecvMsg measures the wrapper's cost on a message of an
// open stream past its first (the outcome already told): the count of
// calls in progress and the look at the stream's context.
func BenchmarkStreamRecvMsg(b *testing.B) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	s := &stream{ClientStream: quietStream{}, ctx: ctx}
	s.settled.Store(true)
	var msg struct{}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.RecvMsg(&msg); err != nil {
			b.Fatal(err)
		}
	}
}
