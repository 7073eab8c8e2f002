package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestFileReadInLinearTime: a file nested as deep as YAML allows is read
// in time linear in its size (each node decoded once), not re-read at
// every level: 5000 levels took 10 to 20 s when each level decoded its
// whole subtree first. The refusal names the key.
func TestFileReadInLinearTime(t *testing.T) {
	const depth = 5000
	for _, nested := range []string{
		strings.Repeat("[", depth) + strings.Repeat("]", depth),
		strings.Repeat("{a: ", depth) + "1" + strings.Repeat("}", depth),
	} {
		file := "services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: " + nested + "}}}}}\n"
		start := time.Now()
		_, err := override.Parse("o.yaml", []byte(file), nil, inventory)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%d levels read in %v", depth, took)
		}
		if want := "o.yaml: " + inv + ".methods.GetStock.retry.retryable_codes: "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("got %v, want a refusal starting %q", err, want)
		}
	}
}

// TestKeyWrittenTwiceAsNumberAndText: 1 and "1" are two keys to YAML and
// one once read (a key is its text): refused as a key written twice, not
// decided by whichever comes last.
func TestKeyWrittenTwiceAsNumberAndText(t *testing.T) {
	got := refused(t, "services: {example.inventory.v1.InventoryService: {methods: {GetStock: {timeout: 1s}}, 1: {}, \"1\": {}}}\n")
	if want := `o.yaml: not valid YAML or JSON: yaml: unmarshal errors: line 1: key "1" already set in map`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// TestTwoPoliciesOfOneService: the loader checks the overrides of a
// service against its policy; given two different ones of one name, it
// cannot tell which the client is built with, and refuses rather than
// checking against whichever came last. The same one twice is one.
func TestTwoPoliciesOfOneService(t *testing.T) {
	other := inventory.Clone()
	other.Methods = other.Methods[:1]
	_, err := override.Parse("o.yaml", nil, nil, inventory, &other)
	if want := "overrides: two policies of example.inventory.v1.InventoryService were given: pass each service's generated XxxResilientPolicy once"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if _, err := override.Parse("o.yaml", []byte(svcYAML("    timeout: 1s\n")), nil, inventory, inventory); err != nil {
		t.Errorf("the same policy twice: %v", err)
	}
}

// TestEmptyCodeInAVariable: a code left empty between commas in a
// variable is refused as the file's [UNAVAILABLE, ""] is, at its index,
// not dropped; a value of no code at all is an empty list, refused as
// such.
func TestEmptyCodeInAVariable(t *testing.T) {
	env := invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES"
	for value, want := range map[string]string{
		"UNAVAILABLE,,DEADLINE_EXCEEDED": env + `[1]: unknown status code "": write a canonical upper-case gRPC code name, such as "UNAVAILABLE" or "DEADLINE_EXCEEDED"`,
		"UNAVAILABLE,":                   env + `[1]: unknown status code ""`,
		" , ":                            env + ": names no status code, which would change nothing",
	} {
		got := refused(t, "", env+"="+value)
		if !strings.HasPrefix(got, want) {
			t.Errorf("%q: got\n%s\nwant it to start\n%s", value, got, want)
		}
	}
	file := refused(t, svcYAML("    methods:\n      GetStock:\n        retry: {retryable_codes: [UNAVAILABLE, \"\", DEADLINE_EXCEEDED]}\n"))
	if want := "o.yaml: " + inv + `.methods.GetStock.retry.retryable_codes[1]: unknown status code "": write a canonical`; !strings.HasPrefix(file, want) {
		t.Errorf("the file: got\n%s\nwant it to start\n%s", file, want)
	}
	if _, err := override.Parse("", nil, []string{env + "=UNAVAILABLE, DEADLINE_EXCEEDED"}, inventory); err != nil {
		t.Errorf("codes with a space after the comma: %v", err)
	}
}

// TestMethodNamedLikeABool: a key is read as written, so methods named
// On, Off, No or Y (YAML 1.1 reads them as bools) are overridden by
// name, not refused as unknown methods "true" and "false".
func TestMethodNamedLikeABool(t *testing.T) {
	var methods []policy.Method
	for _, name := range []string{"On", "Off", "No", "Y"} {
		methods = append(methods, policy.Method{Name: "/dev.v1.Switch/" + name, Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second})
	}
	p := &policy.Service{Name: "dev.v1.Switch", Methods: methods}
	s, err := override.Parse("o.yaml", []byte("services:\n  dev.v1.Switch:\n    methods:\n      On: {timeout: 2s}\n      Off: {timeout: 3s}\n      No: {timeout: 4s}\n      Y: {timeout: 5s}\n"), nil, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := runtime.NewClient(p, s.Options(p)...)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second} {
		if got := c.Policy().Methods[i].Timeout; got != want {
			t.Errorf("%s: timeout %v, want %v", methods[i].Name, got, want)
		}
	}
}
