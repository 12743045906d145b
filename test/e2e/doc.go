// Package e2e holds Strait's end-to-end tests: straitd, sidecars and apps in
// network namespaces on one host. See TestMeshEndToEnd.
package e2e
