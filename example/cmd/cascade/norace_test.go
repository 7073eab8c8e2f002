//go:build !race

package main

// raceDetector is whether the tests run with -race.
const raceDetector = false
