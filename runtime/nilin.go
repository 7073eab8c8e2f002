package runtime

import (
	"fmt"
	"reflect"
	"sync"

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
// goroutine gRPC ends it on, which ends the program; grpc-go runs an
// OnFinish given by value alone, so that one in a pointer or an embedding
// is never called, and let through) or as the request is
// written (grpc.ForceCodec and CallCustomCodec of nil), or given a size
// it panics on as it opens the call (grpc.MaxRetryRPCBufferSize of less
// than 0: not a nil, as sure a panic), or given a codec or credentials
// that are a nil pointer to a type whose methods take a value (grpc-go
// calling one panics; one whose methods take the pointer may work, and is
// let through); a pointer to such an option; or an option of the
// program's whose grpc-go methods come (Go's rule: from the
// shallowest embedding) from a nil grpc.CallOption, a nil pointer, one of
// those, or itself (grpc-go calling it would never end). An option
// embedded deeper, whose methods grpc-go never calls, is not looked at.
// grpc.ForceCodecV2(nil) and grpc.PerRPCCredentials(nil) are no nil to
// grpc-go (it uses the connection's codec, and sends no credentials of
// the call's).
//
// grpc-go's own options holding no nil (those the generated code and the
// runtime add to every call among them) are answered by their type alone:
// no reflection, no allocation. Only another type pays for reflection, and
// only what is nil to be described.
func nilIn(v any) string {
	switch o := v.(type) {
	case grpc.StaticMethodCallOption, grpc.EmptyCallOption, grpc.ContentSubtypeCallOption,
		grpc.FailFastCallOption, grpc.CompressorCallOption, grpc.MaxRecvMsgSizeCallOption,
		grpc.MaxSendMsgSizeCallOption, grpc.AuthorityOverrideCallOption:
		return ""
	case grpc.MaxRetryRPCBufferSizeCallOption:
		if o.MaxRetryRPCBufferSize >= 0 {
			return ""
		}
	case grpc.TrailerCallOption:
		if o.TrailerAddr != nil {
			return ""
		}
	case grpc.HeaderCallOption:
		if o.HeaderAddr != nil {
			return ""
		}
	case grpc.PeerCallOption:
		if o.PeerAddr != nil {
			return ""
		}
	case grpc.OnFinishCallOption:
		// grpc-go runs the OnFinish of an option of this type alone, not
		// through a pointer or an embedding: only here is a nil one called.
		if o.OnFinish != nil {
			return ""
		}
		return "has a nil OnFinish, as grpc.OnFinish(nil) makes: pass a function"
	case grpc.ForceCodecV2CallOption:
		if _, ours := o.CodecV2.(keyedCodec); ours || !isNilPointer(o.CodecV2) {
			return ""
		}
	case grpc.PerRPCCredsCallOption:
		if !isNilPointer(o.Creds) {
			return ""
		}
	case grpc.ForceCodecCallOption:
		if o.Codec != nil && !isNilPointer(o.Codec) {
			return ""
		}
	case grpc.CustomCodecCallOption:
		if o.Codec != nil && !isNilPointer(o.Codec) {
			return ""
		}
	case nil:
		return "is nil"
	}
	return nilByReflection(v)
}

// nilByReflection is nilIn for what its switch does not answer: apart, so
// that the look at grpc-go's options stays a small function.
func nilByReflection(v any) string { return nilAt(reflect.ValueOf(v), passed{}) }

// isNilPointer reports whether v holds a nil pointer (not whether v is
// nil): a look at v's kind, no allocation.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// maxNilDepth bounds how many pointers nilIn follows through an option:
// an option that points to itself is seen to, a chain deeper is let
// through.
const maxNilDepth = 8

// passed are the pointers nilAt followed to reach a value.
type passed struct {
	at [maxNilDepth]uintptr
	n  int
}

// nilAt is nilIn of rv, reached through the pointers seen.
func nilAt(rv reflect.Value, seen passed) string {
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		if rv.IsNil() {
			return "is a nil " + rv.Type().String()
		}
		return ""
	case reflect.Interface:
		if rv.IsNil() {
			return "is a nil " + rv.Type().String()
		}
		return nilAt(rv.Elem(), seen)
	case reflect.Pointer:
		if rv.IsNil() {
			return "is a nil " + rv.Type().String()
		}
		if rv.Elem().Kind() != reflect.Struct {
			return "" // no option: a pointer to anything else has no methods of grpc-go's
		}
		p := rv.Pointer()
		for _, q := range seen.at[:seen.n] {
			if q == p {
				return "points to itself: grpc-go calling it would never end"
			}
		}
		if seen.n == maxNilDepth {
			return ""
		}
		seen.at[seen.n] = p
		seen.n++
		return nilAt(rv.Elem(), seen)
	case reflect.Struct:
	default:
		return ""
	}
	t := rv.Type()
	i := promoter(t)
	switch i {
	case notAnOption, promotesNone:
		return ""
	case grpcsOwn:
		return nilInGRPCs(rv)
	}
	fv := rv.Field(i)
	switch what := nilAt(fv, seen); {
	case what == "":
		return ""
	case fv.Kind() == reflect.Interface && fv.IsNil() || fv.Kind() == reflect.Pointer && fv.IsNil():
		return fmt.Sprintf("embeds a nil %s (in %s)", fv.Type(), t)
	default:
		return fmt.Sprintf("embeds a %s that %s (in %s)", fv.Type(), what, t)
	}
}

// grpcPackage is the import path of grpc-go's options.
const grpcPackage = "google.golang.org/grpc"

// nilTargets are grpc-go's options whose one field grpc-go writes through
// or calls, with what a nil in it is called.
var nilTargets = map[reflect.Type]string{
	reflect.TypeFor[grpc.HeaderCallOption]():      "has a nil HeaderAddr, as grpc.Header(nil) makes: pass the address of a metadata.MD",
	reflect.TypeFor[grpc.TrailerCallOption]():     "has a nil TrailerAddr, as grpc.Trailer(nil) makes: pass the address of a metadata.MD",
	reflect.TypeFor[grpc.PeerCallOption]():        "has a nil PeerAddr, as grpc.Peer(nil) makes: pass the address of a peer.Peer",
	reflect.TypeFor[grpc.ForceCodecCallOption]():  "has a nil Codec, as grpc.ForceCodec(nil) makes: pass a codec, or leave the option out",
	reflect.TypeFor[grpc.CustomCodecCallOption](): "has a nil Codec, as grpc.CallCustomCodec(nil) makes: pass a codec, or leave the option out",
}

// nilInGRPCs is nilAt of one of grpc-go's own options: a nil target, a
// negative grpc.MaxRetryRPCBufferSize, or a codec or credentials that are
// a nil pointer to a type whose methods take a value, which grpc-go calls
// for every call's headers and bytes.
func nilInGRPCs(rv reflect.Value) string {
	if what, ok := nilTargets[rv.Type()]; ok && rv.Field(0).IsNil() {
		return what
	}
	if rv.Type() == reflect.TypeFor[grpc.MaxRetryRPCBufferSizeCallOption]() && rv.Field(0).Int() < 0 {
		// Not a nil, but as sure a panic: grpc-go then calls a nil
		// function as it opens the call.
		return fmt.Sprintf("has a negative MaxRetryRPCBufferSize (%d), on which grpc-go panics as it opens the call: pass 0 or more", rv.Field(0).Int())
	}
	for i := range rv.NumField() {
		fv := rv.Field(i)
		if fv.Kind() != reflect.Interface || fv.IsNil() {
			continue
		}
		held := fv.Elem()
		if held.Kind() != reflect.Pointer || !held.IsNil() || !valueMethods(fv.Type(), held.Type().Elem()) {
			continue
		}
		return fmt.Sprintf("has a %s that is a nil %s, whose methods take a %s: grpc-go calling one panics; pass a %[3]s, or a pointer to one",
			rv.Type().Field(i).Name, held.Type(), held.Type().Elem())
	}
	return ""
}

// valueMethods reports whether t has, with a value receiver, a method of
// the interface iface.
func valueMethods(iface, t reflect.Type) bool {
	for i := range iface.NumMethod() {
		if _, ok := t.MethodByName(iface.Method(i).Name); ok {
			return true
		}
	}
	return false
}

// promoters holds promoter's answer for each type it was asked about.
var promoters sync.Map // reflect.Type → int

// What promoter answers but an index.
const (
	notAnOption  = -1 // not a grpc.CallOption
	grpcsOwn     = -2 // one of grpc-go's options
	promotesNone = -3 // no one embedding found (Go would not promote two at one depth)
)

// promoter returns, for a struct type t, the index of the embedded field
// through which t, a grpc.CallOption of the program's, has the option's
// methods: by Go's rule, the embedding at the shallowest depth that
// declares them (an interface, or one of grpc-go's options). An option
// embedding grpc.EmptyCallOption and, one level deeper, a struct that
// embeds a nil grpc.CallOption has EmptyCallOption's methods: grpc-go
// never calls the nil one. Else notAnOption, grpcsOwn or promotesNone.
// The answer is kept per type: a type asked about again costs a look-up,
// no allocation, no walk of its methods.
func promoter(t reflect.Type) int {
	if i, ok := promoters.Load(t); ok {
		return i.(int)
	}
	i := promotesNone
	switch {
	case !t.Implements(callOptionType):
		i = notAnOption
	case t.PkgPath() == grpcPackage:
		i = grpcsOwn
	default:
		if f := findPromoter(t); f >= 0 {
			i = f
		}
	}
	promoters.Store(t, i)
	return i
}

// findPromoter is promoter, searched breadth first.
func findPromoter(t reflect.Type) int {
	type embedded struct {
		t   reflect.Type
		top int // the index in t of the field it is reached through
	}
	var level []embedded
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous {
			level = append(level, embedded{f.Type, i})
		}
	}
	seen := map[reflect.Type]bool{t: true}
	for len(level) > 0 {
		won := -1
		var next []embedded
		for _, e := range level {
			et := e.t
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			switch {
			case !et.Implements(callOptionType) || seen[et]:
			case declares(et):
				if won >= 0 && won != e.top {
					return -1 // two at one depth: Go would not promote either
				}
				won = e.top
			case et.Kind() == reflect.Struct:
				seen[et] = true
				for i := range et.NumField() {
					if f := et.Field(i); f.Anonymous {
						next = append(next, embedded{f.Type, e.top})
					}
				}
			}
		}
		if won >= 0 {
			return won
		}
		level = next
	}
	return -1
}

// declares reports whether t, a grpc.CallOption, has the option's methods
// of its own, not from an embedding: an interface, or one of grpc-go's
// options but those made by embedding one (grpc.StaticMethodCallOption).
func declares(t reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return true
	}
	if t.PkgPath() != grpcPackage || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous && f.Type.Implements(callOptionType) {
			return false
		}
	}
	return true
}

// callOptionType is the type grpc.CallOption, for nilIn.
var callOptionType = reflect.TypeFor[grpc.CallOption]()
