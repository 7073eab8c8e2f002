package runtime

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// attemptOptions are the options Conn's Invoke is given at each attempt
// of a handle's call given none by its caller: the generated code's
// grpc.StaticMethod, the runtime's trailer option, and for a keyed call
// its codec options.
func attemptOptions(keyed bool) []grpc.CallOption {
	var md metadata.MD
	opts := []grpc.CallOption{grpc.StaticMethod(), grpc.Trailer(&md)}
	if keyed {
		opts = append(opts, keyedOptions...)
	}
	return opts
}

// The options every attempt passes through Conn are looked at by their
// type alone: no allocation (a reflect.Type.Field would allocate).
func TestNilInAllocatesNothingForTheRuntimesOwnOptions(t *testing.T) {
	opts := attemptOptions(true)
	if n := testing.AllocsPerRun(100, func() {
		if err := refuseNilOptions("/m", callersOptions(opts)); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}

// nilCycle is an option of a program's that points to itself: grpc-go
// calls its EmptyCallOption's methods, and nilIn must end.
type nilCycle struct {
	grpc.EmptyCallOption
	*nilCycle
}

func TestNilInEndsOnAnOptionPointingToItself(t *testing.T) {
	c := &nilCycle{}
	c.nilCycle = c
	if what := nilIn(c); what != "" {
		t.Errorf("nilIn(a cycle) = %q, want nothing nil", what)
	}
}

// The values the constructor reads with nilIn: what is not a call option
// is looked at for being nil, not walked.
func TestNilInOfValuesNotOptions(t *testing.T) {
	var nilClock *struct{ Clock }
	var nilInMap map[string]int
	for _, c := range []struct {
		name string
		v    any
		nil  bool
	}{
		{"nil", nil, true},
		{"a nil pointer", nilClock, true},
		{"a nil map", map[string]int(nil), true},
		{"a nil func", (func())(nil), true},
		{"realClock", realClock{}, false},
		{"a struct embedding a nil interface, not an option", struct{ Clock }{}, false},
		{"a pointer to one", &struct{ Clock }{}, false},
		{"a pointer to a nil map", &nilInMap, false},
	} {
		if got := nilIn(c.v) != ""; got != c.nil {
			t.Errorf("nilIn(%s) = %q, want nil %v", c.name, nilIn(c.v), c.nil)
		}
	}
}

// BenchmarkNilOptionsOfAnAttempt is what Conn's check costs each attempt
// of a handle's call given no options by its caller (the handle itself
// runs no check then).
func BenchmarkNilOptionsOfAnAttempt(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			opts := attemptOptions(keyed)
			b.ReportAllocs()
			for b.Loop() {
				if err := refuseNilOptions("/m", callersOptions(opts)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nilInProgramsOption is an option of a program's that carries data for
// an interceptor, as grpc.EmptyCallOption's doc suggests.
type nilInProgramsOption struct {
	grpc.EmptyCallOption
	tenant string
}

// An option of another type is walked by reflection, along the one path
// grpc-go's calls of it take; the path is found once per type: the option
// seen again, or one of grpc-go's given a codec, costs no allocation.
func TestNilInAllocatesNothingForAnOptionSeenBefore(t *testing.T) {
	for _, o := range []grpc.CallOption{
		nilInProgramsOption{tenant: "a"},
		&nilInProgramsOption{tenant: "a"},
		grpc.ForceCodecV2(keyedCodec{}),
		grpc.ForceCodec(protoV1{}),
		grpc.CallCustomCodec(protoV0{}),
	} {
		if what := nilIn(o); what != "" {
			t.Fatalf("nilIn(%T) = %q, want nothing nil", o, what)
		}
		if n := testing.AllocsPerRun(100, func() { _ = nilIn(o) }); n != 0 {
			t.Errorf("nilIn(%T): %v allocations, want 0", o, n)
		}
	}
}

// protoV1 is a codec of grpc-go's first interface.
type protoV1 struct{}

func (protoV1) Marshal(any) ([]byte, error) { return nil, nil }
func (protoV1) Unmarshal([]byte, any) error { return nil }
func (protoV1) Name() string                { return "proto" }

// protoV0 is a codec of grpc-go's deprecated interface.
type protoV0 struct{ protoV1 }

func (protoV0) String() string { return "proto" }

// A long chain of options, each embedding the next, is followed as far as
// maxNilDepth pointers and let through beyond; a cycle longer than one is
// seen.
func TestNilInBoundsItsWalk(t *testing.T) {
	type link struct{ grpc.CallOption }
	var head grpc.CallOption = grpc.Peer(nil)
	for range maxNilDepth + 2 {
		head = &link{head}
	}
	if what := nilIn(head); what != "" {
		t.Errorf("nilIn(a chain deeper than it looks) = %q, want it let through", what)
	}
	a, b := &link{}, &link{}
	a.CallOption, b.CallOption = b, a
	if what := nilIn(a); !strings.Contains(what, "points to itself") {
		t.Errorf("nilIn(a cycle of two) = %q, want it seen", what)
	}
	short := grpc.CallOption(grpc.Peer(nil))
	for range maxNilDepth - 1 {
		short = &link{short}
	}
	if what := nilIn(short); !strings.Contains(what, "nil PeerAddr") {
		t.Errorf("nilIn(a chain within the bound) = %q, want its nil PeerAddr", what)
	}
}

// grpc-go's first codec interface and its deprecated one are looked at as
// its second: a nil *T of value methods is refused, naming the field.
func TestNilInOfACodecThatIsANilPointer(t *testing.T) {
	for _, o := range []grpc.CallOption{grpc.ForceCodec((*protoV1)(nil)), grpc.CallCustomCodec((*protoV0)(nil))} {
		if what := nilIn(o); !strings.Contains(what, "has a Codec that is a nil *runtime.protoV") {
			t.Errorf("nilIn(%T of a nil *protoV1) = %q, want its Codec named", o, what)
		}
	}
}

// A cycle through unexported embedded pointers is seen as well: their
// fields are read, not called.
func TestNilInSeesACycleThroughUnexportedFields(t *testing.T) {
	type hidden struct{ grpc.CallOption }
	type outer struct{ *hidden }
	o := &outer{&hidden{}}
	o.hidden.CallOption = o
	if what := nilIn(o); !strings.Contains(what, "points to itself") {
		t.Errorf("nilIn(a cycle through unexported fields) = %q, want it seen", what)
	}
}

// A call given many options is checked in one pass, each of grpc-go's by
// its type alone: the place of a nil among them is named, and nothing is
// allocated when none is.
func TestRefuseNilOptionsOfManyOptions(t *testing.T) {
	var md metadata.MD
	opts := make([]grpc.CallOption, 100_000)
	for i := range opts {
		opts[i] = grpc.Header(&md)
	}
	if n := testing.AllocsPerRun(10, func() {
		if err := refuseNilOptions("/m", opts); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations for 100000 good options, want 0", n)
	}
	opts[len(opts)-1] = grpc.Header(nil)
	if err := refuseNilOptions("/m", opts); err == nil || !strings.Contains(err.Error(), "call option 99999 has a nil HeaderAddr") {
		t.Errorf("got %v, want option 99999 named", err)
	}
}
