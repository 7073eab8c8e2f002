//go:build !race

package runtime_test

// atkRace is whether the tests run with -race (see race_on_test.go).
const atkRace = false
