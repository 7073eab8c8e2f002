//go:build race

package runtime_test

// atkRace is whether the tests run with -race: the tests that measure an
// adaptive limit against real latencies skip then (the detector slows
// every goroutine several times over, and its latency is the scheduler's);
// the README's test command, go test ./..., runs them.
const atkRace = true
