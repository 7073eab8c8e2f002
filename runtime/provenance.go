package runtime

import (
	"fmt"
	"strings"

	"github.com/go-resilient/resilient/runtime/policy"
)

// Change is one value of the policy that an edit (WithPolicy,
// WithPolicyFrom, an override) changed from what the generated literal
// holds, that is from the annotation or its default.
type Change struct {
	// Key names the value with the field names of the annotations, under
	// "methods.<Method>." for a method: "retry_budget.ratio",
	// "methods.GetStock.timeout", "methods.GetStock.retry.max_attempts".
	Key string
	// Annotated is the value of the annotation (or its default); "none" when
	// the annotation set nothing there.
	Annotated string
	// Value is the value in force.
	Value string
	// Source is where the last edit of the value came from: the key of an
	// override as written, the name given to WithPolicyFrom, or
	// "WithPolicy".
	Source string
}

// Changes returns the values that edits changed from the annotation, in
// the order the edits first changed them; every other value is the
// annotation's. A nil Client (the Runtime() of a generated client
// never built) has none.
func (c *Client) Changes() []Change {
	if c == nil {
		return nil
	}
	return append([]Change(nil), c.changes...)
}

// Describe renders the policy in force for an operator, followed by every
// value that differs from the annotation, with where it came from. Each
// value is one of policy.Service.Settings, under its option name, on the
// line of its group: the service's groups, then per method its kind and
// values, its retry, and for each group the service can share whether it
// has its own, shares the service's or has none (README: Overrides).
func (c *Client) Describe() string {
	if c == nil {
		return "client not built: use the generated New…ResilientClient\n"
	}
	var b strings.Builder
	b.WriteString(describe(&c.policy))
	if len(c.changes) == 0 {
		b.WriteString("  every value as annotated\n")
		return b.String()
	}
	b.WriteString("  changed from the annotation (annotated → in force, from):\n")
	for _, ch := range c.changes {
		fmt.Fprintf(&b, "    %s: %s → %s (%s)\n", ch.Key, ch.Annotated, ch.Value, ch.Source)
	}
	return b.String()
}

// editName names the option an edit came from, for errors.
func editName(source string) string {
	if source == "WithRecordedPolicy" {
		return source
	}
	return "WithPolicy"
}

// applyEdit applies one edit to p and returns changes with what it
// changed merged in: the edit's own record (WithRecordedPolicy), or, for
// a plain edit, what differs between the policy before and after it; or
// the error of a recorded edit that could not apply.
func applyEdit(p *policy.Service, e policyEdit, changes []Change) ([]Change, error) {
	if e.recorded != nil {
		record, err := e.recorded(p)
		if err != nil {
			return nil, err
		}
		return merge(changes, record), nil
	}
	before := inForce(p).Settings()
	e.apply(p)
	return merge(changes, diff(before, inForce(p).Settings(), e.source)), nil
}

// changesInForce writes each change's values as Describe writes the
// policy, the values the runtime uses: a value recorded as written where
// the runtime fills a default (a zero field of an adaptive limit or a
// throttler, "0") is the default in force, before (annotated, the
// literal's) and after (edited, the client's). A change that is then no
// change is dropped. A value recorded otherwise is kept as given.
func changesInForce(annotated, edited *policy.Service, changes []Change) []Change {
	inForceOf := func(p *policy.Service) (raw, in map[string]string) {
		raw, in = map[string]string{}, map[string]string{}
		for _, s := range p.Settings() {
			raw[s.Key] = s.Value
		}
		for _, s := range inForce(p).Settings() {
			in[s.Key] = s.Value
		}
		return raw, in
	}
	wasRaw, wasIn := inForceOf(annotated)
	nowRaw, nowIn := inForceOf(edited)
	kept := changes[:0]
	for _, ch := range changes {
		if v, ok := nowRaw[ch.Key]; ok && v == ch.Value && nowIn[ch.Key] != v {
			ch.Value = nowIn[ch.Key]
		}
		if v, ok := wasRaw[ch.Key]; ok && v == ch.Annotated && wasIn[ch.Key] != v {
			ch.Annotated = wasIn[ch.Key]
		}
		if ch.Value != ch.Annotated {
			kept = append(kept, ch)
		}
	}
	return kept
}

// diff lists what one edit, from source, changed between the flattened
// policies before and after it, each with its value before the edit as
// Annotated.
func diff(before, after []policy.Setting, source string) []Change {
	was := make(map[string]string, len(before))
	for _, s := range before {
		was[s.Key] = s.Value
	}
	// A value the edit removed (a method's own breaker given back) is
	// "none" after it.
	now := make(map[string]bool, len(after))
	for _, s := range after {
		now[s.Key] = true
	}
	for _, s := range before {
		if !now[s.Key] {
			after = append(after, policy.Setting{Key: s.Key, Value: "none"})
		}
	}
	var out []Change
	for _, s := range after {
		old, ok := was[s.Key]
		if ok && old == s.Value {
			continue
		}
		if !ok {
			old = "none"
		}
		out = append(out, Change{Key: s.Key, Annotated: old, Value: s.Value, Source: source})
	}
	return out
}

// merge adds to changes those of one edit, in order, each with its value
// before the edit as Annotated: a value changed before keeps its
// annotated value and takes the edit's value and source.
func merge(changes, edit []Change) []Change {
	for _, e := range edit {
		found := false
		for i := range changes {
			if changes[i].Key == e.Key {
				changes[i].Value, changes[i].Source, found = e.Value, e.Source, true
			}
		}
		if !found {
			changes = append(changes, e)
		}
	}
	// An edit may set a value back to the annotation's: no longer a change.
	kept := changes[:0]
	for _, ch := range changes {
		if ch.Value != ch.Annotated {
			kept = append(kept, ch)
		}
	}
	return kept
}
