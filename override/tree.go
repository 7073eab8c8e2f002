package override

import (
	"errors"
	"fmt"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
)

// yamlNumber is a number of the file as it is written ("3", "0x10",
// "1e1"), not as YAML reads it: the number's text is read by the same
// functions as a variable's (number.go), so that the file and the
// variables have one notation.
type yamlNumber string

// yamlBool is a bool of the file as it is written ("true", "yes", "on"):
// read, like a variable's text, by parseBool, which takes true and false
// only (YAML 1.1 reads yes, no, on, off, y and n as bools too, Go's
// strconv.ParseBool 1, 0, t and f, and neither reads the other's).
type yamlBool string

// yamlNode decodes one node of a YAML (or JSON) document into the tree the
// loader walks: map[string]any, []any, string, nil, yamlNumber for a
// number and yamlBool for a bool.
type yamlNode struct{ v any }

// UnmarshalYAML decodes the node once: a scalar as YAML reads it, but a
// number or a bool as its text; a mapping or a list item by item, each
// item a yamlNode. The node's kind is found by decoding it into what fails
// at once, without reading further, unless the node is of that kind (a
// scalar into a string, a list into a map), so that a document is read in
// time linear in its size, however deeply nested.
func (n *yamlNode) UnmarshalYAML(unmarshal func(any) error) error {
	var text string
	if unmarshal(&text) == nil {
		var v any
		if err := unmarshal(&v); err != nil {
			return err
		}
		switch v.(type) {
		case int, int64, uint64, float64:
			n.v = yamlNumber(text)
		case bool:
			n.v = yamlBool(text)
		default: // string, nil
			n.v = v
		}
		return nil
	}
	var m map[yamlKey]yamlNode
	err := unmarshal(&m)
	if err == nil {
		out := make(map[string]any, len(m))
		for k, item := range m {
			out[string(k)] = item.v
		}
		n.v = out
		return nil
	}
	if !notOfKind(err, m) {
		return err // a mapping, with something wrong inside
	}
	var items []yamlNode
	if err := unmarshal(&items); err != nil {
		return err
	}
	list := make([]any, len(items))
	for i, item := range items {
		list[i] = item.v
	}
	n.v = list
	return nil
}

// notOfKind reports whether err says only that the node is not of the
// kind of target (the decoder's one error for it, naming target's type):
// not what is wrong inside a node of that kind.
func notOfKind(err error, target any) bool {
	te, ok := err.(*yamlv2.TypeError)
	return ok && len(te.Errors) == 1 && strings.HasSuffix(te.Errors[0], fmt.Sprintf(" into %T", target))
}

// UnmarshalText receives the text "null" and "~" in quotes: the decoder
// takes them for a null before it looks at the quotes, and so hands them
// to no UnmarshalYAML, then, seeing text, hands them here. They are text.
func (n *yamlNode) UnmarshalText(text []byte) error {
	n.v = string(text)
	return nil
}

// yamlKey is a mapping's key as written: a method named On or No is
// "On" or "No", not the bool YAML 1.1 reads. Two keys of one text (1 and
// "1") are one key, refused as a key written twice.
type yamlKey string

// UnmarshalYAML reads a key's text; a mapping or a list as a key is
// refused.
func (k *yamlKey) UnmarshalYAML(unmarshal func(any) error) error {
	var text string
	if err := unmarshal(&text); err != nil {
		return errors.New("a key must be a name, not a mapping or a list")
	}
	*k = yamlKey(text)
	return nil
}

// decodeTree reads the first document of data into the loader's tree; a
// key written twice in one mapping is refused, not decided silently by
// whichever comes last.
func decodeTree(data []byte) (any, error) {
	var root yamlNode
	if err := yamlv2.UnmarshalStrict(data, &root); err != nil {
		return nil, err
	}
	return root.v, nil
}
