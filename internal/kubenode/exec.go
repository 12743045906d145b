package kubenode

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// Exec runs command in a pod's container the way `kubectl exec` does (API
// server, then the kubelet, then containerd's streaming server) and
// returns its stdout and stderr. A command that exits non-zero is an
// error that carries its stderr.
func (n *Node) Exec(ctx context.Context, namespace, pod, container string, command ...string) (stdout, stderr string, err error) {
	req := n.API.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(n.API.Config, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		return out.String(), errOut.String(), fmt.Errorf("exec %v in %s/%s (container %s): %w; stderr: %s", command, namespace, pod, container, err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}
