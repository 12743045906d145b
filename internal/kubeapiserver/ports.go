package kubeapiserver

import "github.com/straitmesh/strait/internal/freeport"

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago,
// outside the kernel's ephemeral range (see internal/freeport): etcd and
// the API server bind them seconds later.
func freePorts(n int) ([]int, error) {
	return freeport.Ports("127.0.0.1", n)
}
