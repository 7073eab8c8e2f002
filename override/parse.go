package override

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	yamlv2 "go.yaml.in/yaml/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// service is the overrides of one service.
type service struct {
	name   string
	policy *policy.Service // as annotated
	// values holds, per method ("" for the service), what the overrides
	// set, as the annotation's message, for the rules of internal/rules.
	values map[string]*resilientv1.Policy
	// fileValues holds, per method, what the file alone set: the rules
	// check it too, so that a variable setting the same value again never
	// hides a bad value in the file.
	fileValues map[string]*resilientv1.Policy
	// leaves are in the order read; a later key for the same value from
	// the same source replaces an earlier one. A variable for a value the
	// file sets is a leaf of its own, applied after the file's (ordered).
	leaves []*leaf
}

// leaf is one overridden value.
type leaf struct {
	method string // the method's name ("GetStock"), "" for the service
	path   string // the field path in the annotation: "retry.max_attempts"
	value  any    // bool, uint32, float64, time.Duration or []string
	base   string // the key of the policy the value is in, without the path
	env    bool   // from a variable: the path is spelled in upper case, with "__"
	source string // the key: base and path
	bad    bool   // refused on its own: not applied
}

// keyFor names the key of path in the policy l is in.
func (l *leaf) keyFor(path string) string {
	if l.env {
		return l.base + "__" + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
	}
	return l.base + "." + path
}

var policyDesc = (&resilientv1.Policy{}).ProtoReflect().Descriptor()

// contractFields are facts about the service, not settings: changing them
// would make the client retry what the service does not expect to see
// twice.
var contractFields = map[string]bool{"idempotent": true, "idempotency_key": true,
	// The key function is generated from key_fields; whether a key is
	// generated decides whether a method may be retried.
	"generate_idempotency_key": true, "cache.key_fields": true}

func (s *Set) target(name string, known map[string]*policy.Service) *service {
	t := s.targets[name]
	if t == nil {
		t = &service{name: name, policy: known[name], values: map[string]*resilientv1.Policy{},
			fileValues: map[string]*resilientv1.Policy{}}
		s.targets[name] = t
	}
	return t
}

// parseFile reads the file's tree: services → name → policy fields and
// methods → name → policy fields.
func (s *Set) parseFile(name string, data []byte, known map[string]*policy.Service, errs *problems) {
	if problem := oneDocument(data); problem != "" {
		errs.add(name, "%s", problem)
		return
	}
	root, err := decodeTree(data)
	if err != nil {
		errs.add(name, "not valid YAML or JSON: %s", oneLine(err.Error()))
		return
	}
	if root == nil {
		return // one empty document ("---", "null", comments): no overrides
	}
	top, ok := root.(map[string]any)
	if !ok {
		errs.add(name, "must hold a mapping with one key, services: {<full service name>: {<annotation fields>, methods: {<Method>: {…}}}}")
		return
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "services" {
			errs.add(name+": "+k, "unknown key: the file holds only services: {<full service name>: {…}}")
		}
	}
	services, ok := top["services"].(map[string]any)
	if !ok {
		if top["services"] != nil {
			errs.add(name+": services", "must be a mapping of full service names to their overrides")
		}
		return
	}
	for _, svc := range slices.Sorted(maps.Keys(services)) {
		key := fmt.Sprintf("%s: services.%q", name, svc)
		p := known[svc]
		if p == nil {
			errs.add(key, "unknown service: %s", knownServices(known))
			continue
		}
		obj, ok := services[svc].(map[string]any)
		if !ok {
			errs.add(key, "must be a mapping of annotation fields (timeout, retry, circuit_breaker, …) and methods")
			continue
		}
		if len(obj) == 0 {
			// As retry: {}, it would change nothing, silently.
			errs.add(key, "sets nothing: name the annotation fields to change (timeout, retry, circuit_breaker, …) or methods, or remove it")
			continue
		}
		t := s.target(svc, known)
		methods, hasMethods := obj["methods"]
		delete(obj, "methods")
		t.walk(policyDesc, obj, "", "", key, errs)
		if !hasMethods {
			continue
		}
		mobj, ok := methods.(map[string]any)
		if !ok {
			errs.add(key+".methods", "must be a mapping of method names (as in the .proto: GetStock) to their overrides")
			continue
		}
		if len(mobj) == 0 {
			errs.add(key+".methods", "sets nothing: name the methods to change (as in the .proto: %s), or remove it", strings.TrimPrefix(knownMethods(p), "its methods are "))
			continue
		}
		for _, m := range slices.Sorted(maps.Keys(mobj)) {
			mkey := key + ".methods." + m
			if !hasMethod(p, m) {
				errs.add(mkey, "unknown method of %s%s: %s", svc, didYouMean(suggestMethod(p, m)), knownMethods(p))
				continue
			}
			fields, ok := mobj[m].(map[string]any)
			if !ok {
				errs.add(mkey, "must be a mapping of annotation fields (timeout, retry, …)")
				continue
			}
			if len(fields) == 0 {
				errs.add(mkey, "sets nothing: name the annotation fields to change (timeout, retry, …), or remove it")
				continue
			}
			t.walk(policyDesc, fields, m, "", mkey, errs)
		}
	}
}

// noValue reports whether a file's content is only whitespace and
// comments (or nothing), after a byte-order mark: no overrides. YAML would
// refuse some of it (a tab on a line of its own), which an operator would
// not see as a mistake.
func noValue(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	for line := range bytes.Lines(data) {
		line = bytes.TrimLeft(line, " \t\r\n")
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// oneDocument says what keeps data from being read as one YAML (or JSON)
// document of overrides: text after it that does not parse (JSON with
// trailing garbage) or a second document (after "---") that would be
// ignored; "" when none.
func oneDocument(data []byte) string {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc any
		err := dec.Decode(&doc)
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "not valid YAML or JSON: " + oneLine(err.Error())
		}
		if i > 0 && doc != nil {
			return "holds more than one YAML document (separated by ---), and only the first would be read: put every override in one document"
		}
	}
}

// oneLine joins the lines of a YAML error, so that each problem of the
// report stays on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// walk reads the fields of one message of a policy: a sub-message
// (retry, circuit_breaker, …) field by field, every other field as a
// value.
func (t *service) walk(md protoreflect.MessageDescriptor, obj map[string]any, method, prefix, base string, errs *problems) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		path := prefix + k
		key := base + "." + path
		fd, problem := field(md, k, path)
		if problem != "" {
			errs.add(key, "%s", problem)
			continue
		}
		if sub := fd.Message(); sub != nil && sub.FullName() != "google.protobuf.Duration" {
			o, ok := obj[k].(map[string]any)
			if !ok {
				errs.add(key, "must be a mapping of %s fields: %s", k, fieldNames(sub))
				continue
			}
			if len(o) == 0 {
				// In the annotation, {} means the group with its
				// defaults; here it would change nothing, silently.
				errs.add(key, "sets nothing: name the fields of %s to change (%s)", k, fieldNames(sub))
				continue
			}
			t.walk(sub, o, method, path+".", base, errs)
			continue
		}
		v, err := convert(fd, obj[k])
		if err != nil {
			errs.add(key, "%v", err)
			continue
		}
		t.set(&leaf{method: method, path: path, value: v, base: base, source: key})
	}
}

// field finds the field named k of md, or says what is wrong with k.
func field(md protoreflect.MessageDescriptor, k, path string) (protoreflect.FieldDescriptor, string) {
	fd := md.Fields().ByName(protoreflect.Name(k))
	if fd == nil {
		return nil, fmt.Sprintf("unknown field%s; the fields are those of the annotation: %s", didYouMean(suggestField(md, k)), fieldNames(md))
	}
	if msg := serverFieldProblem(path); msg != "" {
		return nil, msg
	}
	if contractFields[path] {
		return nil, fmt.Sprintf("%s is part of the service's contract, not a setting: an override cannot make a method safe to repeat; change the .proto and regenerate", k)
	}
	return fd, ""
}

func fieldNames(md protoreflect.MessageDescriptor) string {
	var names []string
	for i := range md.Fields().Len() {
		if n := string(md.Fields().Get(i).Name()); md != policyDesc || !contractFields[n] {
			names = append(names, n)
		}
	}
	if md == policyDesc {
		names = append(names, "methods (on a service)")
	}
	return strings.Join(names, ", ")
}

// set records a value, replacing one read earlier from the same source
// for the same field.
func (t *service) set(l *leaf) {
	t.store(t.values, l)
	if !l.env {
		t.store(t.fileValues, l)
	}
	for i, old := range t.leaves {
		if old.method == l.method && old.path == l.path && old.env == l.env {
			t.leaves[i] = l
			return
		}
	}
	t.leaves = append(t.leaves, l)
}

// store writes the value into the method's (or service's) message in
// values, for the rules.
func (t *service) store(values map[string]*resilientv1.Policy, l *leaf) {
	p := values[l.method]
	if p == nil {
		p = &resilientv1.Policy{}
		values[l.method] = p
	}
	put(p.ProtoReflect(), l.path, l.value)
}

// put writes v, a value as convert reads it, at path ("retry.max_attempts")
// in msg.
func put(msg protoreflect.Message, path string, v any) {
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		msg = msg.Mutable(msg.Descriptor().Fields().ByName(protoreflect.Name(part))).Message()
	}
	fd := msg.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1]))
	switch v := v.(type) {
	case bool:
		msg.Set(fd, protoreflect.ValueOfBool(v))
	case uint32:
		msg.Set(fd, protoreflect.ValueOfUint32(v))
	case float64:
		msg.Set(fd, protoreflect.ValueOfFloat64(v))
	case string:
		msg.Set(fd, protoreflect.ValueOfString(v))
	case protoreflect.EnumNumber:
		msg.Set(fd, protoreflect.ValueOfEnum(v))
	case time.Duration:
		msg.Set(fd, protoreflect.ValueOfMessage(durationpb.New(v).ProtoReflect()))
	case []string:
		list := msg.NewField(fd).List()
		for _, s := range v {
			list.Append(protoreflect.ValueOfString(s))
		}
		msg.Set(fd, protoreflect.ValueOfList(list))
	}
}

// convert reads a value for fd from the file's tree (a variable's text
// is first put in the same form, envValue).
func convert(fd protoreflect.FieldDescriptor, raw any) (any, error) {
	switch {
	case fd.IsList():
		items, ok := raw.([]any)
		if !ok {
			return nil, fmt.Errorf("must be a list of status code names, as in [UNAVAILABLE, DEADLINE_EXCEEDED], got %s", show(raw))
		}
		if len(items) == 0 {
			return nil, emptyCodes(fd)
		}
		out := make([]string, len(items))
		for i, it := range items {
			if out[i], ok = it.(string); !ok {
				return nil, fmt.Errorf("item %d must be a status code name, as in UNAVAILABLE, got %s", i, show(it))
			}
		}
		return out, nil
	case fd.Message() != nil: // google.protobuf.Duration
		if text, ok := numberText(raw); ok {
			return parseDuration(text, show(raw))
		}
		return nil, fmt.Errorf("must be a duration with its unit, such as \"200ms\", \"0.2s\" or \"1m30s\", got %s", show(raw))
	case fd.Kind() == protoreflect.BoolKind:
		text, _ := numberText(raw)
		return parseBool(text, show(raw))
	case fd.Kind() == protoreflect.Uint32Kind:
		text, _ := numberText(raw)
		return parseCount(text, show(raw))
	case fd.Kind() == protoreflect.DoubleKind:
		text, _ := numberText(raw)
		return parseReal(text, show(raw))
	}
	if v, ok, err := convertServer(fd, raw); ok {
		return v, err
	}
	return nil, fmt.Errorf("cannot be overridden")
}

// emptyCodes refuses an empty list of codes: the annotation would read it
// as unset, so it would change nothing.
func emptyCodes(fd protoreflect.FieldDescriptor) error {
	hint := "remove it to keep the annotated codes"
	if fd.Name() == "retryable_codes" {
		hint += "; to stop retrying, set retry.max_attempts to 1"
	}
	return fmt.Errorf("names no status code, which would change nothing: %s", hint)
}

// numberText returns the text of a number, a bool, a duration or a
// variable's value: a number or bool of the file as written, or text (quoted in the file, or
// a variable's); ok is false for anything else (a mapping, a list, a
// nothing), which no notation reads.
func numberText(raw any) (text string, ok bool) {
	switch v := raw.(type) {
	case yamlNumber:
		return string(v), true
	case yamlBool:
		return string(v), true
	case string:
		return v, true
	}
	return "", false
}

// envValue puts a variable's text in the form the file's tree holds the
// same value in, for convert: a list of codes is comma-separated;
// anything else stays text, which convert reads as it reads the file's
// (a number or a bool by the notation of number.go) or says what is
// wrong with.
func envValue(fd protoreflect.FieldDescriptor, text string) any {
	switch {
	case fd.IsList():
		// An item left empty ("UNAVAILABLE,,DEADLINE_EXCEEDED", a comma
		// at the end) is kept, and refused as the file's [""] is; only a
		// value with no code at all is an empty list.
		var items []any
		empty := true
		for _, s := range strings.Split(text, ",") {
			s = strings.TrimSpace(s)
			items = append(items, s)
			empty = empty && s == ""
		}
		if empty {
			return []any{}
		}
		return items
	}
	return text
}

func show(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case yamlNumber:
		return strconv.Quote(string(v))
	case yamlBool:
		return strconv.Quote(string(v))
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(raw)
}

func hasMethod(p *policy.Service, name string) bool {
	for i := range p.Methods {
		if methodName(p.Methods[i].Name) == name {
			return true
		}
	}
	return false
}

// methodName is a full method name ("/pkg.Service/GetStock") without its
// service: "GetStock".
func methodName(fullName string) string {
	return fullName[strings.LastIndexByte(fullName, '/')+1:]
}

// didYouMean is the hint " (did you mean s?)", or "" for no suggestion.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", s)
}

func knownMethods(p *policy.Service) string {
	var names []string
	for i := range p.Methods {
		names = append(names, methodName(p.Methods[i].Name))
	}
	return "its methods are " + strings.Join(names, ", ")
}

func knownServices(known map[string]*policy.Service) string {
	if len(known) == 0 {
		return "no client's policy was given to the loader"
	}
	return "this program's clients call " + strings.Join(slices.Sorted(maps.Keys(known)), ", ") + " (write the full service name, as in the .proto's package and service)"
}
