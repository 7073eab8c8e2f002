package runtime

import (
	"context"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// startersOwn reports whether err, the failure of a cache's shared call,
// was caused by its starter's own values, which the call carried: the
// outgoing metadata of ctx, req, and opts (a copy of its call options):
// another caller's call may then be sent (see cached). It runs once per
// failed shared call, on the call's goroutine, and costs a success
// nothing.
//
// gRPC's words for a call it refused on the client's side (see unsent)
// are no proof: a server may answer in the same words, having run the
// call (every caller's call would get that answer), and the ClientConn's
// default call options or an interceptor may be what gRPC refused (every
// caller's call is refused so). So the starter's values are looked at
// again, as gRPC looks at them: the failure is the starter's own only when
// they really fail so. Its metadata must hold the pair gRPC names, and
// that pair must be one gRPC cannot carry (a key outside [0-9a-z-_.], an
// empty key, a value with a byte outside printable ASCII under a key not
// ending in "-bin"); its call options must name the compressor, or the
// content subtype, that no package registered; its request must not
// marshal with the codec its options choose (gRPC's proto codec when they
// choose none: a codec of the ClientConn's own that fails on this request
// alone is taken for every caller's, and its waiters get its failure; a
// request that is no protobuf message, the runtime cannot tell, is taken
// for the starter's); a size limit must be the one its own call option
// set for that way (the last, as gRPC applies them), quoted by gRPC's
// message (the ClientConn's, or the server's, which refuses a request past
// its receive limit in the words of a receive limit, are every caller's).
// A call on a ClientConn the program closed is every caller's.
func startersOwn[Req any](ctx context.Context, err error, req *Req, opts []grpc.CallOption) bool {
	f, ok := unsent(err).(*clientFault)
	if !ok {
		return false
	}
	st := status.Convert(f.err)
	msg := st.Message()
	switch st.Code() {
	case codes.ResourceExhausted:
		ch := choicesOf(opts)
		limit := ch.recv
		if strings.HasPrefix(msg, tooLargeToSend) {
			limit = ch.send
		}
		return limit >= 0 && quotedLimit(msg) == limit
	case codes.Internal:
		switch {
		case strings.HasPrefix(msg, marshalFailure):
			return !marshals(req, choicesOf(opts))
		case strings.HasPrefix(msg, compressorMissing):
			name := choicesOf(opts).compressor
			return name != "" && name != encoding.Identity && encoding.GetCompressor(name) == nil
		case strings.HasPrefix(msg, codecMissing):
			ch := choicesOf(opts)
			return ch.forced == nil && ch.subtype != "" && codecFor(ch.subtype) == nil
		default:
			return cannotCarry(ctx, msg)
		}
	}
	return false // a closed ClientConn's CANCELLED
}

// The starts of some of the messages in unsendable and tooLarge.
const (
	compressorMissing = "grpc: Compressor is not installed for requested grpc-encoding"
	codecMissing      = "no codec registered for content-subtype"
	emptyKey          = "there is an empty key in the header"
	namedKey          = `header key ` // then the key quoted (%q)
	// tooLargeToSend is the start of the message of a request past the
	// client's own send limit (one of tooLarge); the others are a receive
	// limit's, the client's or the server's.
	tooLargeToSend = "trying to send message larger than max"
)

// choices is what a starter's call options chose, the last of each as
// gRPC applies them after the ClientConn's: the send and receive limits
// (-1 for none), the compressor ("" for none), the codec forced (nil for
// none; gRPC uses it whatever the content subtype) and the content
// subtype (lowercased as gRPC does; "" for none).
type choices struct {
	send, recv int
	compressor string
	forced     any
	subtype    string
}

// choicesOf reads opts, an option given by pointer as by value (grpc-go
// calls their value methods through a pointer too; refuse has refused a
// nil one). Read only for a failed shared call.
func choicesOf(opts []grpc.CallOption) choices {
	ch := choices{send: -1, recv: -1}
	for _, o := range opts {
		if rv := reflect.ValueOf(o); rv.Kind() == reflect.Pointer && !rv.IsNil() {
			if v, ok := rv.Elem().Interface().(grpc.CallOption); ok {
				o = v
			}
		}
		switch o := o.(type) {
		case grpc.MaxSendMsgSizeCallOption:
			ch.send = o.MaxSendMsgSize
		case grpc.MaxRecvMsgSizeCallOption:
			ch.recv = o.MaxRecvMsgSize
		case grpc.CompressorCallOption:
			ch.compressor = o.CompressorType
		case grpc.ForceCodecV2CallOption:
			ch.forced = codecV2(o.CodecV2)
		case grpc.ForceCodecCallOption:
			ch.forced = o.Codec
		case grpc.CustomCodecCallOption:
			ch.forced = o.Codec
		case grpc.ContentSubtypeCallOption:
			ch.subtype = strings.ToLower(o.ContentSubtype)
		}
	}
	return ch
}

// quotedLimit returns the limit gRPC's message of a message past a size
// limit quotes, its last number ("… larger than max (9 vs. 4)", "… larger
// than max 4"), or -1.
func quotedLimit(msg string) int {
	end := len(msg)
	for end > 0 && (msg[end-1] < '0' || msg[end-1] > '9') {
		end--
	}
	start := end
	for start > 0 && msg[start-1] >= '0' && msg[start-1] <= '9' {
		start--
	}
	n, err := strconv.Atoi(msg[start:end])
	if err != nil {
		return -1
	}
	return n
}

// marshaler is a codec of gRPC's older kinds (encoding.Codec, grpc.Codec).
type marshaler interface {
	Marshal(v any) ([]byte, error)
}

// codecV2 is c as an any, nil when c is (grpc.ForceCodecV2(nil) forces
// none).
func codecV2(c encoding.CodecV2) any {
	if c == nil {
		return nil
	}
	return c
}

// codecFor is the codec gRPC finds for a content subtype, nil when
// none is registered.
func codecFor(subtype string) any {
	if c := encoding.GetCodec(subtype); c != nil { //nolint:staticcheck // gRPC looks there first
		return c
	}
	if c := encoding.GetCodecV2(subtype); c != nil {
		return c
	}
	return nil
}

// marshals reports whether req marshals with the codec ch chose (gRPC's
// proto codec when none); a request that is no protobuf message with no
// codec chosen, or a codec that panics, does not.
func marshals[Req any](req *Req, ch choices) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	forced := ch.forced
	if forced == nil && ch.subtype != "" {
		forced = codecFor(ch.subtype)
	}
	switch c := forced.(type) {
	case encoding.CodecV2:
		data, err := c.Marshal(req)
		data.Free()
		return err == nil
	case marshaler:
		_, err := c.Marshal(req)
		return err == nil
	}
	pm, isProto := any(req).(proto.Message)
	if !isProto {
		return false
	}
	_, err := proto.Marshal(pm)
	return err == nil
}

// cannotCarry reports whether the outgoing metadata of ctx holds the pair
// that msg, gRPC's INTERNAL of metadata it cannot carry, names, and that
// pair is one gRPC cannot carry (the rules of grpc-go's
// internal/metadata.ValidatePair). gRPC quotes the key as the program gave
// it: a key with capitals, in metadata built by hand (metadata.MD{…}),
// is read back lowercased, and its quoted form tells.
func cannotCarry(ctx context.Context, msg string) bool {
	md, _ := metadata.FromOutgoingContext(ctx)
	if strings.HasPrefix(msg, emptyKey) {
		_, ok := md[""]
		return ok
	}
	rest, ok := strings.CutPrefix(msg, namedKey)
	if !ok {
		return false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return false
	}
	key, err := strconv.Unquote(q)
	if err != nil {
		return false
	}
	vals, ok := md[strings.ToLower(key)]
	switch {
	case !ok:
		return false
	case !legalKey(key):
		return true
	case strings.HasSuffix(key, "-bin"):
		return false
	}
	for _, v := range vals {
		if !printable(v) {
			return true
		}
	}
	return false
}

// legalKey reports whether gRPC sends key: one or more of [0-9a-z-_.], or
// a pseudo-header (":…").
func legalKey(key string) bool {
	if key == "" {
		return false
	}
	if key[0] == ':' {
		return true
	}
	for i := 0; i < len(key); i++ {
		r := key[i]
		if !(r >= 'a' && r <= 'z') && !(r >= '0' && r <= '9') && r != '.' && r != '-' && r != '_' {
			return false
		}
	}
	return true
}

// printable reports whether every byte of v is printable ASCII
// (0x20–0x7E), as gRPC requires of a value under a key not ending in
// "-bin".
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7E {
			return false
		}
	}
	return true
}
