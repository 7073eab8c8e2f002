// Package override lets an operator change the annotated policy of a
// generated client without recompiling: a file (YAML or JSON) and
// environment variables, using the field names of the annotations, loaded
// once at start-up and checked with the rules the plugin applies to the
// .proto (internal/rules), so that an override can never set what the
// plugin would refuse.
//
// The file:
//
//	services:
//	  example.inventory.v1.InventoryService:   # full service name
//	    circuit_breaker: {cool_down: 5s}       # as (resilient.v1.service)
//	    methods:
//	      GetStock:                            # as (resilient.v1.method)
//	        timeout: 200ms
//	        retry: {max_attempts: 2}
//
// The environment, after the file: a variable wins over the file whatever
// the level of either (source first, then level; the README's table):
//
//	RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=5s
//	RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__TIMEOUT=200ms
//
// Service-level values apply to every method, as a service annotation
// does; method-level values to that method. Every problem names its key
// (the file and the path in it, or the variable); an unknown service,
// method or field, a bad value or an unsafe policy (retries on a method
// that is not idempotent) is refused, and Load returns no Set, so the
// client is not built on a bad file.
package override

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Set holds checked overrides for the services of a program.
type Set struct {
	targets map[string]*service // by full service name
}

// Load reads the overrides in the file at path ("" for none) and in the
// variables of environ that start with RESILIENT__ (os.Environ() form, nil
// for none), and checks them against the annotated policies of the clients
// the program builds (the generated XxxResilientPolicy variables). It
// refuses, naming each key, every override that is unknown, malformed or
// unsafe.
func Load(path string, environ []string, policies ...*policy.Service) (*Set, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("overrides: %w", err)
		}
	}
	return Parse(path, data, environ, policies...)
}

// Parse is Load with the file's content given: name is the file's name in
// errors and in Client.Describe; data is YAML or JSON (nil for no file). A
// file that holds no value (0 bytes, only whitespace and comments, or one
// empty document: "---", "null") overrides nothing, as no file does: an
// operator's file with every line commented out.
func Parse(name string, data []byte, environ []string, policies ...*policy.Service) (*Set, error) {
	known := make(map[string]*policy.Service, len(policies))
	for _, p := range policies {
		if p == nil {
			return nil, errors.New("overrides: nil policy: pass the generated XxxResilientPolicy of each client")
		}
		if other := known[p.Name]; other != nil && other != p {
			// The overrides would be checked against one of them only.
			return nil, fmt.Errorf("overrides: two policies of %s were given: pass each service's generated XxxResilientPolicy once", p.Name)
		}
		known[p.Name] = p
	}
	s := &Set{targets: map[string]*service{}}
	var errs problems
	if !noValue(data) {
		s.parseFile(name, data, known, &errs)
	}
	s.parseEnv(environ, known, &errs)
	names := slices.Sorted(maps.Keys(s.targets))
	for _, name := range names {
		s.targets[name].check(&errs)
	}
	// What the values that are right on their own make together, in the
	// same report: an operator mends every problem in one go.
	for _, name := range names {
		if _, err := s.targets[name].apply(known[name].Clone()); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, errs.err()
	}
	return s, nil
}

// Options returns the runtime options that apply the overrides of service
// p: one runtime.WithRecordedPolicy that applies each key in turn, in the
// order of precedence, and hands the runtime the record of what each key
// changed, so that Client.Changes and Client.Describe list every value an
// override moved with the key that moved it, as written. Pass them in the
// generated options' Runtime; none when nothing overrides p.
//
// The client is refused when the options reach the client of another
// service than p, or when an edit before them took away what a key tunes
// (a method's cache, its own bulkhead): an override is applied or
// refused, never dropped.
func (s *Set) Options(p *policy.Service) []runtime.Option {
	if s == nil || p == nil {
		return nil
	}
	t := s.targets[p.Name]
	if t == nil {
		return nil
	}
	var leaves []*leaf
	for _, l := range t.ordered() {
		if !isServerLeaf(l) { // for the server: ServerOptions
			leaves = append(leaves, l)
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	return []runtime.Option{runtime.WithRecordedPolicy(func(p *policy.Service) ([]runtime.Change, error) {
		if p.Name != t.name {
			return nil, fmt.Errorf("overrides of %s given to the client of %s: pass each client the options of its own policy, set.Options(&<its XxxResilientPolicy>)", t.name, p.Name)
		}
		var record []runtime.Change
		for _, l := range leaves {
			// Parse checked each key against the annotated policy; an
			// edit before this one may have changed it since.
			changes, err := t.applyRecorded(p, l)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", l.source, err)
			}
			record = append(record, changes...)
		}
		return record, nil
	})}
}

// Keys lists every override of the set by its key, in the order they
// apply.
func (s *Set) Keys() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.targets)) {
		for _, l := range s.targets[name].ordered() {
			out = append(out, l.source)
		}
	}
	return out
}

// problems are the reasons a set of overrides is refused, one line each.
type problems []string

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, key+": "+fmt.Sprintf(format, args...))
}

// err returns the problems as one error, nil for none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return errors.New(strings.Join(ps, "\n"))
}
