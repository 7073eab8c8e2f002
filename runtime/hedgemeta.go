package runtime

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// callerMeta is where a hedged call's caller asked gRPC to write what an
// attempt learns at its end: the grpc.Header, grpc.Trailer and grpc.Peer
// options among its call options. gRPC writes them as each attempt ends;
// hedged copies run at once, and a loser, cancelled, ends after the copy
// that answered. So each copy writes into its own copyMeta instead, and the
// call hands the caller the one of the copy whose answer or error it
// returns (fill). A call given none of these options (the common case)
// has no callerMeta and copies nothing.
type callerMeta struct {
	header  []*metadata.MD
	trailer []*metadata.MD
	peer    []*peer.Peer
}

// copyMeta is what one hedged copy's attempt learnt, written by gRPC.
type copyMeta struct {
	header, trailer metadata.MD
	peer            peer.Peer
}

// callerMetaOf returns the targets of the grpc.Header, grpc.Trailer and
// grpc.Peer options in opts, nil when there are none. A pointer to one of
// those options is one too: grpc-go calls its value methods through it,
// and writes where it points as each copy ends (refuse has refused a nil
// one).
func callerMetaOf(opts []grpc.CallOption) *callerMeta {
	var c *callerMeta
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			c = orNew(c)
			c.header = append(c.header, o.HeaderAddr)
		case *grpc.HeaderCallOption:
			c = orNew(c)
			c.header = append(c.header, o.HeaderAddr)
		case grpc.TrailerCallOption:
			c = orNew(c)
			c.trailer = append(c.trailer, o.TrailerAddr)
		case *grpc.TrailerCallOption:
			c = orNew(c)
			c.trailer = append(c.trailer, o.TrailerAddr)
		case grpc.PeerCallOption:
			c = orNew(c)
			c.peer = append(c.peer, o.PeerAddr)
		case *grpc.PeerCallOption:
			c = orNew(c)
			c.peer = append(c.peer, o.PeerAddr)
		}
	}
	return c
}

func orNew(c *callerMeta) *callerMeta {
	if c == nil {
		return new(callerMeta)
	}
	return c
}

// callerTarget is what of the caller's memory a call option has gRPC
// write into as the call ends.
type callerTarget uint8

const (
	writesNothing callerTarget = iota
	writesHeader
	writesTrailer
	writesPeer
)

// targetOf says what of the caller's memory o has gRPC write into: the
// grpc.Header, grpc.Trailer and grpc.Peer options, by value or pointer
// (grpc-go calls their value methods through a pointer too). The layers
// that make several gRPC calls of one (hedging) or one of many (a cache's
// shared call) point these elsewhere or leave them out.
func targetOf(o grpc.CallOption) callerTarget {
	switch o.(type) {
	case grpc.HeaderCallOption, *grpc.HeaderCallOption:
		return writesHeader
	case grpc.TrailerCallOption, *grpc.TrailerCallOption:
		return writesTrailer
	case grpc.PeerCallOption, *grpc.PeerCallOption:
		return writesPeer
	}
	return writesNothing
}

// optsFor returns opts with the caller's Header, Trailer and Peer options
// pointed at cm.
func optsFor(opts []grpc.CallOption, cm *copyMeta) []grpc.CallOption {
	own := make([]grpc.CallOption, len(opts))
	for i, o := range opts {
		switch targetOf(o) {
		case writesHeader:
			own[i] = grpc.Header(&cm.header)
		case writesTrailer:
			own[i] = grpc.Trailer(&cm.trailer)
		case writesPeer:
			own[i] = grpc.Peer(&cm.peer)
		default:
			own[i] = o
		}
	}
	return own
}

// fill writes cm, the metadata of the copy whose result the call returns,
// where the caller asked for it; nothing when cm is nil (no copy was sent:
// the caller's targets are left as they were, as for a call never made).
func (c *callerMeta) fill(cm *copyMeta) {
	if cm == nil {
		return
	}
	for _, p := range c.header {
		*p = cm.header
	}
	for _, p := range c.trailer {
		*p = cm.trailer
	}
	for _, p := range c.peer {
		*p = cm.peer
	}
}
