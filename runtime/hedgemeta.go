package runtime

import (
	"reflect"

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
// one); so is an option of the program's that embeds one (see writerOf).
func callerMetaOf(opts []grpc.CallOption) *callerMeta {
	var c *callerMeta
	for _, o := range opts {
		switch w := writerOf(o).(type) {
		case grpc.HeaderCallOption:
			c = orNew(c)
			c.header = append(c.header, w.HeaderAddr)
		case grpc.TrailerCallOption:
			c = orNew(c)
			c.trailer = append(c.trailer, w.TrailerAddr)
		case grpc.PeerCallOption:
			c = orNew(c)
			c.peer = append(c.peer, w.PeerAddr)
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
// grpc.Header, grpc.Trailer and grpc.Peer options, by value, by pointer
// or embedded in an option of the program's (see writerOf). The layers
// that make several gRPC calls of one (hedging) or one of many (a cache's
// shared call) point these elsewhere or leave them out.
func targetOf(o grpc.CallOption) callerTarget {
	switch writerOf(o).(type) {
	case grpc.HeaderCallOption:
		return writesHeader
	case grpc.TrailerCallOption:
		return writesTrailer
	case grpc.PeerCallOption:
		return writesPeer
	}
	return writesNothing
}

// writerOf returns, as one of grpc-go's options by value, the
// grpc.Header, grpc.Trailer or grpc.Peer option through which o has gRPC
// write into the caller's memory: o itself, what o points to (grpc-go
// calls their value methods through a pointer too; refuse has refused a
// nil one), or, for an option of the program's, the one of these its
// grpc-go methods come from (Go's rule: the shallowest embedding, through
// values, pointers and interfaces, as promoter finds it: grpc-go calls
// those methods, and writes where the embedded option points). Nil for
// any other option. grpc-go's own options are answered by their type
// alone, no reflection, no allocation; only another type pays for
// reflection (promoter keeps its walk of a type).
func writerOf(o grpc.CallOption) grpc.CallOption {
	switch o := o.(type) {
	case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
		return o
	case *grpc.HeaderCallOption:
		return *o
	case *grpc.TrailerCallOption:
		return *o
	case *grpc.PeerCallOption:
		return *o
	case nil, grpc.StaticMethodCallOption, grpc.EmptyCallOption, grpc.ContentSubtypeCallOption,
		grpc.FailFastCallOption, grpc.CompressorCallOption, grpc.MaxRecvMsgSizeCallOption,
		grpc.MaxSendMsgSizeCallOption, grpc.AuthorityOverrideCallOption, grpc.OnFinishCallOption,
		grpc.ForceCodecV2CallOption, grpc.ForceCodecCallOption, grpc.CustomCodecCallOption,
		grpc.PerRPCCredsCallOption, grpc.MaxRetryRPCBufferSizeCallOption:
		return nil
	}
	return embeddedWriter(reflect.ValueOf(o))
}

// embeddedWriter is writerOf of an option of a type writerOf's switch
// does not know: apart, so that the switch stays a small function.
func embeddedWriter(rv reflect.Value) grpc.CallOption {
	// Only the pointers followed are counted, as nilIn counts them: a
	// value (a struct embedded by value, what an interface holds) never
	// holds itself but through a pointer, so that the walk ends.
	for followed := 0; ; {
		switch rv.Kind() {
		case reflect.Interface, reflect.Pointer:
			if rv.IsNil() || rv.Kind() == reflect.Pointer && followed == maxNilDepth {
				return nil // deeper than the runtime looks, as nilIn
			}
			if rv.Kind() == reflect.Pointer {
				followed++
			}
			rv = rv.Elem()
			continue
		case reflect.Struct:
		default:
			return nil
		}
		switch i := promoter(rv.Type()); i {
		case notAnOption, promotesNone:
			return nil
		case grpcsOwn:
			// Read through the field's address: an option reached through
			// an unexported embedding cannot be made an interface again.
			switch rv.Type() {
			case reflect.TypeFor[grpc.HeaderCallOption]():
				return grpc.HeaderCallOption{HeaderAddr: (*metadata.MD)(rv.Field(0).UnsafePointer())}
			case reflect.TypeFor[grpc.TrailerCallOption]():
				return grpc.TrailerCallOption{TrailerAddr: (*metadata.MD)(rv.Field(0).UnsafePointer())}
			case reflect.TypeFor[grpc.PeerCallOption]():
				return grpc.PeerCallOption{PeerAddr: (*peer.Peer)(rv.Field(0).UnsafePointer())}
			}
			return nil
		default:
			rv = rv.Field(i)
		}
	}
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
