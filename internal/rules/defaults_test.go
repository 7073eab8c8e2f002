// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/options"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// optionsFile is the options contract's compiled descriptor.
var optionsFile = resilientv1.File_resilient_v1_resilient_proto

// eachField calls f with every field of every message of the options,
// nested ones included.
func eachField(f func(protoreflect.FieldDescriptor)) {
	var walkMessages func(protoreflect.MessageDescriptors)
	walkMessages = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			for j := range md.Fields().Len() {
				f(md.Fields().Get(j))
			}
			walkMessages(md.Messages())
		}
	}
	walkMessages(optionsFile.Messages())
}

// pathsOf maps each message of the options reached from Policy to its
// path there ("" for Policy, "server.dedup" for Dedup).
func pathsOf() map[protoreflect.FullName]string {
	out := map[protoreflect.FullName]string{}
	var walk func(md protoreflect.MessageDescriptor, path string)
	walk = func(md protoreflect.MessageDescriptor, path string) {
		out[md.FullName()] = path
		for i := range md.Fields().Len() {
			if fd := md.Fields().Get(i); isGroup(fd) {
				walk(fd.Message(), join(path, string(fd.Name())))
			}
		}
	}
	walk((&resilientv1.Policy{}).ProtoReflect().Descriptor(), "")
	return out
}

// Every default_value of the options parses by its field's kind, and is
// in the table of defaults at its field's path: a default on a message
// no policy reaches would be read by nobody.
func TestEveryDefaultParses(t *testing.T) {
	paths := pathsOf()
	n := 0
	eachField(func(fd protoreflect.FieldDescriptor) {
		text, ok := defaultValue(fd)
		if !ok {
			return
		}
		n++
		parent := fd.ContainingMessage()
		if _, err := parseDefault(newMessage(parent), fd, text); err != nil {
			t.Error(err)
			return
		}
		group, reached := paths[parent.FullName()]
		if !reached {
			t.Errorf("%s: default_value %q is on a message no policy reaches", fd.FullName(), text)
			return
		}
		d := DefaultOf(group)
		if group == "" {
			d = defaults()
		}
		if d == nil || !d.ProtoReflect().Has(fd) {
			t.Errorf("%s: default_value %q is not in the table of defaults at %s", fd.FullName(), text, join(group, string(fd.Name())))
		}
	})
	if n < 27 {
		t.Errorf("%d fields declare a default_value, want the contract's 27 at least", n)
	}
}

// newMessage is an empty message of md, from the options' Go types.
func newMessage(md protoreflect.MessageDescriptor) protoreflect.Message {
	var found protoreflect.Message
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if m.Descriptor().FullName() == md.FullName() {
			found = m
			return
		}
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); isGroup(fd) && found == nil {
				walk(m.NewField(fd).Message())
			}
		}
	}
	walk((&resilientv1.Policy{}).ProtoReflect())
	if found == nil {
		panic("no Go type for " + md.FullName())
	}
	return found
}

// fieldAt is the field at path ("retry.max_attempts") of Policy.
func fieldAt(t *testing.T, path string) (protoreflect.Message, protoreflect.FieldDescriptor) {
	t.Helper()
	m := (&resilientv1.Policy{}).ProtoReflect()
	names := strings.Split(path, ".")
	for i, name := range names {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("no field %s in the options", path)
		}
		if i == len(names)-1 {
			return m, fd
		}
		m = m.NewField(fd).Message()
	}
	panic("unreachable")
}

// A default_value that does not parse is refused naming the field, the
// text and the notation to write, whatever its kind; one that parses
// gives the value written.
func TestParseDefault(t *testing.T) {
	for _, tc := range []struct {
		path, text, want string // want: "" to parse
	}{
		{"retry.max_attempts", "3", ""},
		{"retry.max_attempts", "three", `resilient.v1.Retry.max_attempts: default_value "three" is not a count`},
		{"retry.max_attempts", "-1", "is not a count"},
		{"retry.max_attempts", "4294967296", "is not a count: write a whole number from 0 to 4294967295"},
		{"retry.max_attempts", " 3", "is not a count"},
		{"retry.backoff_multiplier", "1.5", ""},
		{"retry.backoff_multiplier", "NaN", `resilient.v1.Retry.backoff_multiplier: default_value "NaN" is not a finite number`},
		{"retry.backoff_multiplier", "+Inf", "is not a finite number"},
		{"retry.backoff_multiplier", "1e999", "is not a finite number"},
		{"retry.initial_backoff", "50ms", ""},
		{"retry.initial_backoff", "50", `resilient.v1.Retry.initial_backoff: default_value "50" is not a duration: write one as Go does, as "10s"`},
		{"retry.initial_backoff", "{seconds: 1}", "is not a duration"},
		{"retry.retryable_codes", "UNAVAILABLE,DEADLINE_EXCEEDED", ""},
		{"retry.retryable_codes", "UNAVAILABLE, DEADLINE_EXCEEDED", `resilient.v1.Retry.retryable_codes: default_value "UNAVAILABLE, DEADLINE_EXCEEDED" is not a list of status codes`},
		{"retry.retryable_codes", "", "is not a list of status codes"},
		{"retry.retryable_codes", "UNAVAILABLE,", "is not a list of status codes"},
		{"retry.retryable_codes", "unavailable", "is not a list of status codes"},
		{"shedding.code", "RESOURCE_EXHAUSTED", ""},
		{"shedding.code", "Unavailable", `resilient.v1.Shedding.code: default_value "Unavailable" is not a status code: did you mean "UNAVAILABLE"?`},
		{"server.dedup.on_store_error", "ON_STORE_ERROR_RUN_WITHOUT_DEDUP", ""},
		{"server.dedup.on_store_error", "RUN_WITHOUT_DEDUP", `resilient.v1.Dedup.on_store_error: default_value "RUN_WITHOUT_DEDUP" is not a value of resilient.v1.OnStoreError: write one of ON_STORE_ERROR_UNSPECIFIED, ON_STORE_ERROR_REFUSE, ON_STORE_ERROR_RUN_WITHOUT_DEDUP`},
		{"circuit_breaker.per_method", "false", `resilient.v1.CircuitBreaker.per_method: default_value "false" cannot be read: a bool field has no notation for a default`},
		{"cache.key_fields", "sku", "is not a list of status codes"},
		{"retry", "{}", "cannot be read: a resilient.v1.Retry field has no notation"},
	} {
		m, fd := fieldAt(t, tc.path)
		v, err := parseDefault(m, fd, tc.text)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s = %q: %v", tc.path, tc.text, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s = %q: error %v, want one containing %q", tc.path, tc.text, err, tc.want)
		case tc.want == "":
			m.Set(fd, v)
			if got := optionNotation(fd, m.Get(fd)); got != tc.text {
				t.Errorf("%s = %q parsed as %q", tc.path, tc.text, got)
			}
		}
	}
}

// optionNotation writes v back in default_value's notation.
func optionNotation(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.IsList():
		var names []string
		for i := range v.List().Len() {
			names = append(names, v.List().Get(i).String())
		}
		return strings.Join(names, ",")
	case fd.Message() != nil:
		return v.Message().Interface().(*durationpb.Duration).AsDuration().String()
	case fd.Kind() == protoreflect.EnumKind:
		return string(fd.Enum().Values().ByNumber(v.Enum()).Name())
	}
	return fmt.Sprint(v.Interface())
}

// Every default passes the checks an options author's value passes: a
// count in range, a code its list may hold, a backoff order that holds.
func TestDefaultsPassTheChecks(t *testing.T) {
	var got []string
	add := func(path, format string, args ...any) { got = append(got, path+": "+fmt.Sprintf(format, args...)) }
	refused := map[string]bool{}
	walk(defaults().ProtoReflect(), "", nil, refused, add)
	checkValues(defaults(), map[string]bool{}, refused, add)
	CheckBackoff(Merged{Policy: &resilientv1.Policy{Retry: &resilientv1.Retry{}}}, func(f Finding) { got = append(got, f.Path+": "+f.Message) })
	for _, p := range got {
		t.Errorf("a default is refused: %s", p)
	}
}

// The defaults the runtime needs without the options contract, constants
// of internal/contract, are the options' default_value (or, for a default
// that follows another value, the value the .proto's prose states first).
func TestContractConstantsAreTheDefaults(t *testing.T) {
	prose := proseDefaults(t)
	for _, c := range []struct {
		path string
		want any
	}{
		{"retry_budget.ratio", contract.BudgetRatio},
		{"retry_budget.min_retries", contract.BudgetMinRetries},
		{"retry_budget.window", contract.BudgetWindow},
		{"server.dedup.lease", contract.Lease},
		{"shedding.pushback", contract.ShedPushback},
		{"adaptive_limit.min_limit", contract.AdaptiveMinLimit},
		{"adaptive_limit.max_limit", contract.AdaptiveMaxLimit},
		{"adaptive_limit.initial_limit", contract.AdaptiveInitialLimit},
		{"adaptive_limit.tolerance", contract.AdaptiveTolerance},
		{"adaptive_limit.smoothing", contract.AdaptiveSmoothing},
		{"adaptive_limit.baseline_window", contract.AdaptiveBaselineWindow},
		{"client_throttle.k", contract.ThrottleK},
		{"client_throttle.window", contract.ThrottleWindow},
		{"client_throttle.max_refusal", contract.ThrottleMaxRefusal},
	} {
		m, fd := fieldAt(t, c.path)
		text, ok := defaultValue(fd)
		where := "default_value"
		if !ok {
			text, ok = prose[fd.FullName()]
			where = "prose default"
		}
		if !ok {
			t.Errorf("%s: the .proto states no default for contract's %v", fd.FullName(), c.want)
			continue
		}
		v, err := parseDefault(m, fd, text)
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if got := goValue(fd, v); got != c.want {
			t.Errorf("%s: %s %q is %v (%T), but internal/contract says %v (%T): change one", fd.FullName(), where, text, got, got, c.want, c.want)
		}
	}
}

// goValue is v as the runtime holds it: a Duration as a time.Duration, a
// count as an int, a number as a float64.
func goValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.Message() != nil:
		return v.Message().Interface().(*durationpb.Duration).AsDuration()
	case fd.Kind() == protoreflect.Uint32Kind:
		return int(v.Uint())
	}
	return v.Interface()
}

// The prose "Default: X." of each field's comment in the .proto, which
// users read, and the default column of the README's option table say
// the default_value the field declares, in words a reader writes
// ("10 s", `["UNAVAILABLE"]`).
func TestProseDefaultsAgree(t *testing.T) {
	for _, source := range []struct {
		name  string
		said  map[protoreflect.FullName]string
		least int
	}{
		{"the comment", proseDefaults(t), 27},
		{"the README's option table", readmeDefaults(t), 27},
	} {
		t.Run(source.name, func(t *testing.T) { agree(t, source.name, source.said, source.least) })
	}
}

// agree checks that prose, the defaults a text states, says the
// default_value of every field it states one for, and states at least
// least of them.
func agree(t *testing.T, source string, prose map[protoreflect.FullName]string, least int) {
	n := 0
	eachField(func(fd protoreflect.FieldDescriptor) {
		text, ok := defaultValue(fd)
		said, stated := prose[fd.FullName()]
		if !ok || !stated {
			return
		}
		n++
		m := newMessage(fd.ContainingMessage())
		want, err := parseDefault(m, fd, text)
		if err != nil {
			t.Error(err)
			return
		}
		got, err := parseDefault(m, fd, said)
		if err != nil {
			t.Errorf("%s: %s's default %q is not one the test reads: write it as %q (%v)", fd.FullName(), source, said, text, err)
			return
		}
		a, b := newMessage(fd.ContainingMessage()), newMessage(fd.ContainingMessage())
		a.Set(fd, want)
		b.Set(fd, got)
		if !proto.Equal(a.Interface(), b.Interface()) {
			t.Errorf("%s: %s says the default is %s, the option default_value %q: change one", fd.FullName(), source, said, text)
		}
	})
	if n < least {
		t.Errorf("%s states the default of %d fields that declare a default_value, want %d at least", source, n, least)
	}
}

// readmeDefaults reads the default column of the README's option table
// ("| `retry.max_attempts` | count | 3 | …"), in default_value's notation
// (proseDefault), by the field's full name.
func readmeDefaults(t *testing.T) map[protoreflect.FullName]string {
	t.Helper()
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "\n| field | unit | default | meaning | plugin checks |\n")
	if !ok {
		t.Fatal("the README has no option table headed | field | unit | default | meaning | plugin checks |")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	out := map[protoreflect.FullName]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `") {
			continue
		}
		path := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		md := (&resilientv1.Policy{}).ProtoReflect().Descriptor()
		var fd protoreflect.FieldDescriptor
		for _, name := range strings.Split(path, ".") {
			if md == nil {
				fd = nil
				break
			}
			if fd = md.Fields().ByName(protoreflect.Name(name)); fd == nil {
				break
			}
			md = fd.Message()
		}
		if fd == nil {
			continue
		}
		if said, ok := proseDefault("Default: " + strings.ReplaceAll(cells[2], "`", "")); ok {
			out[fd.FullName()] = said
		}
	}
	if len(out) == 0 {
		t.Fatal("no default found in the README's option table: the test no longer reads it")
	}
	return out
}

var (
	messageLine = regexp.MustCompile(`^message (\w+) \{$`)
	fieldLine   = regexp.MustCompile(`^  (?:optional |repeated )?[\w.]+ (\w+) = \d+[ ;]`)
	spacedUnit  = regexp.MustCompile(`^(\d+(?:\.\d+)?) (ns|us|µs|ms|s|m|h)$`)
)

// proseDefaults reads, from the .proto's source, the default each
// field's leading comment states ("Default: 10 s."), in default_value's
// notation: the first value after "Default:", up to the end of its
// sentence, a comma, a colon or a parenthesis; a list's brackets and
// quotes and a duration's space before its unit dropped.
func proseDefaults(t *testing.T) map[protoreflect.FullName]string {
	t.Helper()
	src, err := fs.ReadFile(options.Files(), optionsFile.Path())
	if err != nil {
		t.Fatal(err)
	}
	out := map[protoreflect.FullName]string{}
	var msg string
	var comment []string
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for sc.Scan() {
		line := sc.Text()
		if m := messageLine.FindStringSubmatch(line); m != nil {
			msg = m[1]
		}
		if c, ok := strings.CutPrefix(line, "  //"); ok {
			comment = append(comment, strings.TrimPrefix(c, " "))
			continue
		}
		if m := fieldLine.FindStringSubmatch(line); m != nil && msg != "" {
			if said, ok := proseDefault(strings.Join(comment, " ")); ok {
				out[protoreflect.FullName(fmt.Sprintf("%s.%s.%s", optionsFile.Package(), msg, m[1]))] = said
			}
		}
		comment = nil
	}
	if len(out) == 0 {
		t.Fatal("no prose default found in the .proto: the test no longer reads its comments")
	}
	return out
}

// proseDefault is the value after "Default: " in a comment, in
// default_value's notation.
func proseDefault(comment string) (string, bool) {
	_, rest, ok := strings.Cut(comment, "Default: ")
	if !ok {
		return "", false
	}
	var said string
	if strings.HasPrefix(rest, "[") {
		list, _, _ := strings.Cut(rest[1:], "]")
		said = strings.NewReplacer(`"`, "", " ", "").Replace(list)
	} else {
		end := len(rest)
		for _, stop := range []string{". ", ", ", ": ", " (", ";"} {
			if i := strings.Index(rest, stop); i >= 0 && i < end {
				end = i
			}
		}
		said = strings.TrimSuffix(rest[:end], ".")
		said = strings.Trim(said, `"`)
		said = spacedUnit.ReplaceAllString(said, "$1$2")
	}
	return said, true
}

// The prose reader reads each way the .proto states a default.
func TestProseDefault(t *testing.T) {
	for comment, want := range map[string]string{
		"Default: 3. Must be at least 1.":                      "3",
		"Default: 50 ms. Must be positive.":                    "50ms",
		"Default: 0.1 (10 % extra load at most). Must be":      "0.1",
		`Default: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]: a dep`: "UNAVAILABLE,DEADLINE_EXCEEDED",
		`codes. Default: ["UNAVAILABLE"]. Answers are refused`: "UNAVAILABLE",
		`"RESOURCE_EXHAUSTED". Default: "UNAVAILABLE".`:        "UNAVAILABLE",
		"Default: 100, or the bulkhead's permits if fewer.":    "100",
		"Default: 1.5. Must be at least 1.":                    "1.5",
		"Default: 0.9.":                                        "0.9",
		"Default: 30 s. Must be at least 10 ns.":               "30s",
	} {
		if got, ok := proseDefault(comment); !ok || got != want {
			t.Errorf("proseDefault(%q) = %q, want %q", comment, got, want)
		}
	}
	if _, ok := proseDefault("Default, whenever a method retries: ratio 0.1"); ok {
		t.Error("a sentence that states no \"Default: \" read as one")
	}
}
