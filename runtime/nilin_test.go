package runtime

import (
	"fmt"
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
