package runtime

import (
	"fmt"
	"reflect"

	"google.golang.org/grpc"
)

// nilIn returns what in v is nil that its user would call or write
// through, completing "it ...", or "" when nothing is. It is the one check
// of the runtime for a nil given where a value is needed: a Clock or a
// prometheus.Registerer (read once, as the client is built), a connection,
// and each call option of every call given options.
//
// v is nil (a nil interface: "is nil"), or a nil pointer, map, slice, func
// or channel ("is a nil *T": a *prometheus.Registry never made, a
// *grpc.HeaderCallOption never set, through which grpc-go calls the
// option's value methods). A grpc.CallOption besides: one of grpc-go's
// options given nil that grpc-go writes through or calls as the call ends
// (grpc.Header, Trailer, Peer and OnFinish of nil; for a stream, on the
// goroutine gRPC ends it on, which ends the program) or as the request is
// written (grpc.ForceCodec and CallCustomCodec of nil); a pointer to such
// an option; or an option of the program's that embeds a grpc.CallOption
// left nil, or one of those. grpc.ForceCodecV2(nil) and
// grpc.PerRPCCredentials(nil) are no nil to grpc-go (it uses the
// connection's codec, and sends no credentials of the call's).
//
// grpc-go's own options, by value (those the generated code and the
// runtime add to every call among them), are answered by their type alone:
// no reflection, no allocation. Only what is nil pays to be described.
func nilIn(v any) string { return nilWithin(v, maxNilDepth) }

// maxNilDepth bounds how deep nilIn follows pointers and embedded options:
// an option that points to itself is looked at this deep, not for ever.
const maxNilDepth = 4

// nilWithin is nilIn, following at most depth pointers and embeddings.
func nilWithin(v any, depth int) string {
	switch o := v.(type) {
	case nil:
		return "is nil"
	case grpc.StaticMethodCallOption, grpc.EmptyCallOption, grpc.ContentSubtypeCallOption,
		grpc.ForceCodecV2CallOption, grpc.PerRPCCredsCallOption, grpc.FailFastCallOption,
		grpc.CompressorCallOption, grpc.MaxRecvMsgSizeCallOption, grpc.MaxSendMsgSizeCallOption,
		grpc.MaxRetryRPCBufferSizeCallOption, grpc.AuthorityOverrideCallOption:
		return ""
	case grpc.TrailerCallOption:
		if o.TrailerAddr == nil {
			return "has a nil TrailerAddr, as grpc.Trailer(nil) makes: pass the address of a metadata.MD"
		}
		return ""
	case grpc.HeaderCallOption:
		if o.HeaderAddr == nil {
			return "has a nil HeaderAddr, as grpc.Header(nil) makes: pass the address of a metadata.MD"
		}
		return ""
	case grpc.PeerCallOption:
		if o.PeerAddr == nil {
			return "has a nil PeerAddr, as grpc.Peer(nil) makes: pass the address of a peer.Peer"
		}
		return ""
	case grpc.OnFinishCallOption:
		if o.OnFinish == nil {
			return "has a nil OnFinish, as grpc.OnFinish(nil) makes: pass a function"
		}
		return ""
	case grpc.ForceCodecCallOption:
		if o.Codec == nil {
			return "has a nil Codec, as grpc.ForceCodec(nil) makes: pass a codec, or leave the option out"
		}
		return ""
	case grpc.CustomCodecCallOption:
		if o.Codec == nil {
			return "has a nil Codec, as grpc.CallCustomCodec(nil) makes: pass a codec, or leave the option out"
		}
		return ""
	}
	return nilByReflection(v, depth)
}

// nilByReflection is nilWithin for a value of any other type: apart, so
// that the look at grpc-go's options stays a small function.
func nilByReflection(v any, depth int) string {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		if rv.IsNil() {
			return fmt.Sprintf("is a nil %T", v)
		}
		return ""
	case reflect.Pointer:
		if rv.IsNil() {
			return fmt.Sprintf("is a nil %T", v)
		}
	}
	if _, ok := v.(grpc.CallOption); !ok || depth == 0 {
		return ""
	}
	// An option grpc-go calls through: what it points to, or what it
	// embeds, is called in turn.
	if rv.Kind() == reflect.Pointer {
		return nilWithin(rv.Elem().Interface(), depth-1)
	}
	if rv.Kind() != reflect.Struct {
		return ""
	}
	t := rv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.Anonymous || !f.Type.Implements(callOptionType) {
			continue
		}
		fv := rv.Field(i)
		if k := fv.Kind(); (k == reflect.Interface || k == reflect.Pointer) && fv.IsNil() {
			return fmt.Sprintf("embeds a nil %s (in %T)", f.Type, v)
		}
		if !fv.CanInterface() {
			continue // unexported: not read
		}
		if what := nilWithin(fv.Interface(), depth-1); what != "" {
			return fmt.Sprintf("embeds a %s that %s (in %T)", f.Type, what, v)
		}
	}
	return ""
}

// callOptionType is the type grpc.CallOption, for nilIn.
var callOptionType = reflect.TypeFor[grpc.CallOption]()
