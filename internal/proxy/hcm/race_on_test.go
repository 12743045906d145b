//go:build race

package hcm

// raceDetector is whether the tests run under the race detector, whose
// shadow memory grows the process's RSS with every goroutine it has seen
// and is never returned (memoryInUse).
const raceDetector = true
