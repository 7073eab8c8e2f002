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
