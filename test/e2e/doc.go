// Package e2e holds Strait's end-to-end tests: straitd, sidecars and apps in
// network namespaces on one host. See mesh_test.go.
package e2e
