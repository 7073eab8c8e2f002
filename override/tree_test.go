package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
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
// one once read: refused, not decided by whichever comes last.
func TestKeyWrittenTwiceAsNumberAndText(t *testing.T) {
	got := refused(t, "services: {example.inventory.v1.InventoryService: {methods: {GetStock: {timeout: 1s}}, 1: {}, \"1\": {}}}\n")
	if want := `o.yaml: not valid YAML or JSON: the key "1" is written twice in one mapping`; got != want {
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
