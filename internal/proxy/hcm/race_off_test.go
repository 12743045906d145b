//go:build !race

package hcm

// raceDetector: see race_on_test.go.
const raceDetector = false
