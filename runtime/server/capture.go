package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// capture records the headers and trailers a handler sets, passing them
// on, so that a kept outcome replays them.
type capture struct {
	grpc.ServerTransportStream
	mu              sync.Mutex
	header, trailer metadata.MD
}

// withCapture returns ctx whose grpc.SetHeader, grpc.SendHeader and
// grpc.SetTrailer are recorded by the returned capture; nil, and ctx
// unchanged, outside a gRPC server.
func withCapture(ctx context.Context) (context.Context, *capture) {
	inner := grpc.ServerTransportStreamFromContext(ctx)
	if inner == nil {
		return ctx, nil
	}
	c := &capture{ServerTransportStream: inner}
	return grpc.NewContextWithServerTransportStream(ctx, c), c
}

func (c *capture) record(md *metadata.MD, add metadata.MD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*md = metadata.Join(*md, add)
}

func (c *capture) SetHeader(md metadata.MD) error {
	err := c.ServerTransportStream.SetHeader(md)
	if err == nil {
		c.record(&c.header, md)
	}
	return err
}

func (c *capture) SendHeader(md metadata.MD) error {
	err := c.ServerTransportStream.SendHeader(md)
	if err == nil {
		c.record(&c.header, md)
	}
	return err
}

func (c *capture) SetTrailer(md metadata.MD) error {
	err := c.ServerTransportStream.SetTrailer(md)
	if err == nil {
		c.record(&c.trailer, md)
	}
	return err
}

// set returns what was recorded, without the transport's keys.
func (c *capture) set() (header, trailer metadata.MD) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return replayable(c.header), replayable(c.trailer)
}
