package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/localmesh"
)

// podAttack makes the test binary the attacker of TestLocalPodIsolation:
// it tries each target given as an argument ("read:PATH" reads a file,
// "sds:PATH" fetches the workload certificate and key from an agent's SDS
// socket) and prints one line per target: "TARGET ok DETAIL" or
// "TARGET denied ERROR".
var podAttack = flag.Bool("pod-attack", false, "try to read the files and SDS sockets given as arguments, instead of running tests")

func runPodAttack(targets []string) int {
	for _, target := range targets {
		kind, path, _ := strings.Cut(target, ":")
		var detail string
		var err error
		switch kind {
		case "read":
			var data []byte
			if data, err = os.ReadFile(path); err == nil {
				detail = fmt.Sprintf("%d bytes", len(data))
			}
		case "sds":
			detail, err = fetchWorkloadKey(path)
		default:
			err = fmt.Errorf("unknown target kind %q", kind)
		}
		if err != nil {
			fmt.Printf("%s denied %s\n", target, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Printf("%s ok %s\n", target, detail)
	}
	return 0
}

// fetchWorkloadKey asks the SDS socket for "default", as the proxy does,
// and returns the certificate's SPIFFE ID once the answer also holds the
// private key.
func fetchWorkloadKey(socket string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer cc.Close()
	stream, err := secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(ctx)
	if err != nil {
		return "", err
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", ResourceNames: []string{"default"}}); err != nil {
		return "", err
	}
	resp, err := stream.Recv()
	if err != nil {
		return "", err
	}
	for _, r := range resp.GetResources() {
		var s tlsv3.Secret
		if err := r.UnmarshalTo(&s); err != nil {
			return "", err
		}
		tc := s.GetTlsCertificate()
		if len(tc.GetPrivateKey().GetInlineBytes()) == 0 {
			continue
		}
		block, _ := pem.Decode(tc.GetCertificateChain().GetInlineBytes())
		if block == nil {
			return "", fmt.Errorf("secret %s: no certificate", s.GetName())
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", err
		}
		if len(cert.URIs) == 0 {
			return "", fmt.Errorf("secret %s: certificate without a SPIFFE ID", s.GetName())
		}
		return "key+cert " + cert.URIs[0].String(), nil
	}
	return "", fmt.Errorf("no secret with a private key in %d resources", len(resp.GetResources()))
}

// TestLocalPodIsolation attacks the local mesh from inside a pod. Pod A
// ("client") and pod B ("echo-v1") run sidecars with workload identities
// (SecureXDS, as local up runs them). A process that owns A's app, then one
// that owns A's sidecar — their users, inside their network and mount
// namespaces, entered with nsenter from the running processes — tries to
// read B's token, to fetch B's certificate and private key from B's SDS
// socket, and to read straitd's CA key and token key. Every attempt must
// fail, while A's proxy user still gets A's own certificate from A's
// socket (the attacker works) and A's requests reach B over mTLS.
func TestLocalPodIsolation(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A's app is this test binary (as an L4 server): below go test's 0700
	// build directory, so the app user reaches it only through its view.
	m := startMesh(ctx, t, "mtls", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10", App: []string{self, "-l4-serve", "client"}, AppPort: 9000},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
	}})
	a, b := m.Pod("client"), m.Pod("echo-v1")

	// The attacker binary, in A's own directory: there in A's view.
	attacker := filepath.Join(a.Dir(), "attacker")
	if err := copyFile(self, attacker, 0o755); err != nil {
		t.Fatal(err)
	}
	stolen := []string{
		"read:" + filepath.Join(b.Dir(), "var/run/secrets/tokens/istio-token"),
		"sds:" + b.SDSSocket(),
		"read:" + filepath.Join(m.CADir(), ca.KeyFile),
		"read:" + filepath.Join(m.CADir(), token.KeyFile),
	}
	for _, target := range stolen {
		if _, err := os.Stat(strings.SplitN(target, ":", 2)[1]); err != nil {
			t.Fatalf("target %s is not there for the root of the host: %v", target, err)
		}
	}
	own := "sds:" + a.SDSSocket()

	for _, who := range []struct {
		name    string
		process string // whose namespaces and user the attacker takes
		uid     int
		own     bool // must get A's own certificate
	}{
		{"A's app", "client-app", a.AppUID(), false},
		{"A's sidecar", "client-agent", a.ProxyUID(), true},
	} {
		t.Run(who.name, func(t *testing.T) {
			pid, err := m.PID(who.process)
			if err != nil {
				t.Fatal(err)
			}
			if uid := procUID(t, pid); uid != who.uid || uid == 0 {
				t.Errorf("%s runs as UID %d, want its own non-root %d", who.process, uid, who.uid)
			}
			args := []string{"-t", strconv.Itoa(pid), "--mount", "--net", "--setuid", strconv.Itoa(who.uid), "--setgid", strconv.Itoa(who.uid),
				"--", attacker, "-pod-attack"}
			args = append(args, stolen...)
			args = append(args, own)
			out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("attacker: %v\n%s", err, out)
			}
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				target, rest, _ := strings.Cut(line, " ")
				got[target] = rest
			}
			for _, target := range stolen {
				if r, ok := got[target]; !ok || !strings.HasPrefix(r, "denied ") {
					t.Errorf("%s as UID %d in %s's namespaces: %s: %q, want denied", who.name, who.uid, who.process, target, r)
				}
			}
			if who.own {
				const want = "ok key+cert spiffe://cluster.local/ns/demo/sa/default"
				if r := got[own]; r != want {
					t.Errorf("%s fetching its own certificate: %q, want %q", who.name, r, want)
				}
			}
			t.Logf("attacker output:\n%s", out)
		})
	}

	t.Run("A reaches B over mTLS", func(t *testing.T) {
		before := stat(t, ctx, b, "listener.0.0.0.0_15006.ssl.handshake")
		waitOK(ctx, t, a.NewHTTPClient(false), localmesh.DemoURL)
		if n := stat(t, ctx, a, "cluster.outbound|80||echo.demo.svc.cluster.local.ssl.handshake"); n < 1 {
			t.Errorf("client cluster ssl.handshake = %d, want >= 1", n)
		}
		if n := stat(t, ctx, b, "listener.0.0.0.0_15006.ssl.handshake"); n <= before {
			t.Errorf("server inbound ssl.handshake = %d (was %d): the request did not arrive over TLS", n, before)
		}
	})
}

// procUID is the real UID of a process.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				uid, err := strconv.Atoi(f[0])
				if err != nil {
					t.Fatal(err)
				}
				return uid
			}
		}
	}
	t.Fatalf("/proc/%d/status has no Uid line", pid)
	return 0
}

// copyFile copies src to dst with mode.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}
