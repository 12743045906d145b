// Command pause is the sandbox ("pause") container of the one-node test
// cluster (internal/kubenode): it holds a pod's namespaces open and does
// nothing else. As the first process of the pod's PID namespace (when the
// pod shares it) it reaps the zombies reparented to it, as Kubernetes'
// build/pause/linux/pause.c does; it exits 0 on SIGINT or SIGTERM.
//
// It is built static (CGO_ENABLED=0) into an image by kubenode, because the
// test machine reaches no registry to pull registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
