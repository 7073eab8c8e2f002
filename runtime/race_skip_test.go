package runtime_test

import "testing"

// atkSkipUnderRace skips a test that measures an adaptive limit against
// real latencies when the race detector runs (atkRace).
func atkSkipUnderRace(t *testing.T) {
	t.Helper()
	if atkRace {
		t.Skip("a measurement of latencies under load: run without -race (the README's test command, go test ./..., runs it)")
	}
}
