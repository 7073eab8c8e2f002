package runtime

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/runtime/policy"
)

// sameMethods checks that an edit (from source) left the annotated policy's
// methods as the generated client binds them: every method keeps exactly
// one entry, under its own name, of its own kind, naming no idempotency-key
// field and no cache-key fields but those its generated code reads (it may
// drop them: the key is then not sent, the cache not used), and declared
// neither idempotent nor given a generated key if the annotation was not;
// and the service keeps its name. The order of the entries may change;
// their other fields are the edit's to change.
// annotated is the policy before any edit.
func sameMethods(annotated, edited *policy.Service, source string) error {
	var errs []error
	bad := func(method, format string, args ...any) {
		errs = append(errs, fmt.Errorf("resilient: NewClient(%s): the edit from %s: method %s: %s",
			annotated.Name, source, method, fmt.Sprintf(format, args...)))
	}
	if edited.Name != annotated.Name {
		errs = append(errs, fmt.Errorf("resilient: NewClient(%s): the edit from %s: Name changed to %q: it names "+
			"the service the generated client calls (and the dependency in errors, logs and metrics); leave it as generated",
			annotated.Name, source, edited.Name))
	}
	check.Entries(annotated.Name, annotated.Methods, edited.Methods, func(m *policy.Method) string { return m.Name },
		func(want, m *policy.Method) { sameMethod(want, m, bad) }, func(method, why string) { bad(method, "%s", why) })
	return errors.Join(errs...)
}

// sameMethod checks one method's entry m of an edit against its annotated
// policy want: the fields the generated code is bound to stay as generated.
func sameMethod(want, m *policy.Method, bad func(method, format string, args ...any)) {
	if m.Kind != want.Kind {
		bad(want.Name, "Kind changed from %s to %s: the kind of an RPC is the .proto's", want.Kind.String(), m.Kind.String())
	}
	// Whether a method may be repeated is the service's contract, not a
	// setting: an edit may make it stricter, never safe to repeat.
	if m.Idempotent && !want.Idempotent {
		bad(want.Name, "Idempotent changed from false to true: whether a method may be repeated is the "+
			"service's contract; change idempotency_level in the .proto and regenerate")
	}
	if m.GenerateIdempotencyKey && !want.GenerateIdempotencyKey {
		bad(want.Name, "GenerateIdempotencyKey changed from false to true: a generated key makes a method "+
			"that is not idempotent retried, which only the .proto can say (generate_idempotency_key); regenerate")
	}
	if m.IdempotencyKey != "" && m.IdempotencyKey != want.IdempotencyKey {
		bad(want.Name, "IdempotencyKey changed from %q to %q: the generated client reads the annotated "+
			"field; change idempotency_key in the .proto and regenerate", want.IdempotencyKey, m.IdempotencyKey)
	}
	if m.Cache != nil && want.Cache != nil && !slices.Equal(m.Cache.KeyFields, want.Cache.KeyFields) {
		bad(want.Name, "Cache.KeyFields changed from %q to %q: the generated client makes the key of the "+
			"annotated fields; change key_fields in the .proto and regenerate", want.Cache.KeyFields, m.Cache.KeyFields)
	}
}

// bind returns the method of c named method, which must be of one of the
// kinds (described by what, for the error).
func (c *Client) bind(method, what string, kinds ...policy.Kind) (*methodState, error) {
	if c == nil {
		return nil, fmt.Errorf("resilient: binding %s: nil Client", method)
	}
	m := c.byName[method]
	if m == nil {
		return nil, fmt.Errorf("resilient: policy %s has no entry for method %s: the generated client "+
			"and its policy disagree; regenerate, and keep every method's entry in WithPolicy edits",
			c.policy.Name, method)
	}
	for _, k := range kinds {
		if m.policy.Kind == k {
			return m, nil
		}
	}
	return nil, fmt.Errorf("resilient: policy %s: method %s is %s, but its policy says %s: leave Kind as generated",
		c.policy.Name, method, what, m.policy.Kind.String())
}
