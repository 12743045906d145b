package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// credentialsGatewayYAML: an ingress gateway in namespace gw whose
// servers name Kubernetes Secrets: a.example.com (SIMPLE, a
// kubernetes.io/tls Secret) and b.example.com (MUTUAL, a generic Secret
// with its CA in a separate b-cred-cacert Secret) on 8443, c.example.com
// (SIMPLE, a Secret that does not exist yet) alone on 9443, and plaintext
// HTTP on 8080. Every request is answered by a direct response.
const credentialsGatewayYAML = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: ingressgateway
  namespace: gw
spec:
  address: %s
  labels: {istio: ingressgateway}
  serviceAccount: ingressgateway
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: ingress
  namespace: gw
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8443, name: https-a, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: SIMPLE, credentialName: a-cred}
  - port: {number: 8443, name: https-b, protocol: HTTPS}
    hosts: [b.example.com]
    tls: {mode: MUTUAL, credentialName: b-cred}
  - port: {number: 9443, name: https-c, protocol: HTTPS}
    hosts: [c.example.com]
    tls: {mode: SIMPLE, credentialName: c-cred}
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: direct
  namespace: gw
spec:
  hosts: ["*"]
  gateways: [ingress]
  http:
  - directResponse:
      status: 200
      body: {string: through-the-gateway}
`

// testIssuer is a CA that issues PEM certificates.
type testIssuer struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	pool   *x509.CertPool
	serial int64
}

func newTestIssuer(t *testing.T, name string) *testIssuer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testIssuer{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: pool, serial: 100}
}

// issue returns a certificate for dns and its key, in PEM, and its serial.
func (ca *testIssuer) issue(t *testing.T, dns string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, serial int64) {
	t.Helper()
	ca.serial++
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), ca.serial
}

// crl returns a PEM revocation list of ca that revokes serials.
func (ca *testIssuer) crl(t *testing.T, serials ...int64) []byte {
	t.Helper()
	var revoked []x509.RevocationListEntry
	for _, s := range serials {
		revoked = append(revoked, x509.RevocationListEntry{SerialNumber: big.NewInt(s), RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(24 * time.Hour), RevokedCertificateEntries: revoked}, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// TestKubeGatewayCredentials runs straitd against a real kube-apiserver
// and a gateway (strait-agent proxy router, in a network namespace the
// test creates) whose Gateway servers name Kubernetes Secrets, and
// checks with Go's TLS client, verifying against the Secrets' CA, that
// the gateway serves HTTPS with the Secret's certificate, which straitd
// sends it over ADS; that a rewritten Secret is served by the same
// gateway process without a restart; that the MUTUAL server requires a
// client certificate that the CA of b-cred-cacert verifies; and that the
// server whose Secret is missing has no filter chain while the others
// keep working, until the Secret is created. The CA Secret's crl revokes
// a client certificate of that CA, which is refused.
func TestKubeGatewayCredentials(t *testing.T) {
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
	for _, b := range []string{"straitd", "strait-agent", "strait-proxy"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			testreq.Missing(t, "no %s in %s: build ./cmd/... into STRAIT_BIN_DIR", b, binDir)
		}
	}
	network := netns.NewTestNetwork(t)
	pod := network.AddTestPod(t, "gw")
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, ns := range []string{"istio-system", "gw"} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	serverCA, clientCA := newTestIssuer(t, "server CA"), newTestIssuer(t, "client CA")
	aCert, aKey, aSerial := serverCA.issue(t, "a.example.com", x509.ExtKeyUsageServerAuth)
	bCert, bKey, _ := serverCA.issue(t, "b.example.com", x509.ExtKeyUsageServerAuth)
	clientCertPEM, clientKeyPEM, _ := clientCA.issue(t, "client.example.com", x509.ExtKeyUsageClientAuth)
	clientCert, err := tls.X509KeyPair(clientCertPEM, clientKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	revokedCertPEM, revokedKeyPEM, revokedSerial := clientCA.issue(t, "revoked.example.com", x509.ExtKeyUsageClientAuth)
	revokedClient, err := tls.X509KeyPair(revokedCertPEM, revokedKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	secrets := kc.CoreV1().Secrets("gw")
	create := func(s *corev1.Secret) {
		t.Helper()
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a-cred"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": aCert, "tls.key": aKey}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b-cred"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"cert": bCert, "key": bKey}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b-cred-cacert"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"cacert": clientCA.pem, "crl": clientCA.crl(t, revokedSerial)}})
	applyIstioTo(ctx, t, env.Dynamic, fmt.Sprintf(credentialsGatewayYAML, pod.IP))
	// The gateway's service account may read its namespace's Secrets, as
	// Istio's gateway chart grants it: straitd asks (SubjectAccessReview)
	// before it serves one.
	if _, err := kc.RbacV1().Roles("gw").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "ingressgateway-sds"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "watch", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().RoleBindings("gw").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ingressgateway-sds"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "ingressgateway-sds"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ingressgateway", Namespace: "gw"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// straitd on the bridge's host address, where the gateway reaches it.
	host := network.HostIP.String()
	xdsAddr, monAddr := freeAddr(t, host), freeAddr(t, "127.0.0.1")
	var straitdLog, agentLog syncBuffer
	sd := exec.Command(filepath.Join(binDir, "straitd"), "--kubeconfig="+env.KubeconfigPath,
		"--xds-addr="+xdsAddr, "--monitoring-addr="+monAddr, "--secure-xds-addr=", "--inject-addr=", "--webhook-config-name=",
		"--namespace=istio-system", "--config-status=false", "--log-level=debug")
	sd.Stdout, sd.Stderr = &straitdLog, &straitdLog
	if err := sd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sd.Process.Kill()
		_ = sd.Wait()
		if t.Failed() {
			t.Logf("straitd:\n%s", tail(straitdLog.String(), 60))
			t.Logf("gateway agent:\n%s", tail(agentLog.String(), 60))
		}
	}()

	dir := t.TempDir()
	proxyConfig := fmt.Sprintf(`{"discoveryAddress":%q,"binaryPath":%q,"configPath":%q,"proxyAdminPort":15000,"statusPort":15020}`,
		xdsAddr, filepath.Join(binDir, "strait-proxy"), filepath.Join(dir, "proxy"))
	agent, err := pod.Start(ctx, netns.ExecOptions{Dir: dir, Stdout: &agentLog, Stderr: &agentLog, Env: []string{
		"POD_NAME=ingressgateway-1", "POD_NAMESPACE=gw", "INSTANCE_IP=" + pod.IP.String(), "SERVICE_ACCOUNT=ingressgateway",
		"PROXY_CONFIG=" + proxyConfig, "MINIMUM_DRAIN_DURATION=1s", "HOME=" + dir,
	}}, filepath.Join(binDir, "strait-agent"), "proxy", "router", "--domain", "gw.svc.cluster.local", "--concurrency", "1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agent.Kill() }()
	agentPID := agent.Cmd.Process.Pid

	gwAddr := func(port int) string { return net.JoinHostPort(pod.IP.String(), strconv.Itoa(port)) }
	// get sends GET https://HOST/ (or http://) to the gateway's port and
	// returns the serial of the certificate the gateway presented.
	get := func(port int, scheme, host string, cfg *tls.Config) (int64, error) {
		hc := gatewayClient(gwAddr(port), cfg)
		resp, err := hc.Get(scheme + "://" + host + "/")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "through-the-gateway" {
			return 0, fmt.Errorf("%d %q, want the direct response", resp.StatusCode, body)
		}
		if resp.TLS == nil {
			return 0, nil
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	tlsFor := func(host string, certs ...tls.Certificate) *tls.Config {
		return &tls.Config{ServerName: host, RootCAs: serverCA.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
	}

	waitFor(ctx, t, 90*time.Second, "HTTPS a.example.com with a-cred's certificate", func() error {
		serial, err := get(8443, "https", "a.example.com", tlsFor("a.example.com"))
		if err == nil && serial != aSerial {
			return fmt.Errorf("certificate serial %d, want a-cred's %d", serial, aSerial)
		}
		return err
	})
	t.Run("one ADS stream carries the secrets", func(t *testing.T) {
		// The gateway's proxy asks straitd for the credentials on its one
		// ADS stream (relayed by its agent), as Envoy does with
		// sds_config {ads: {}}: one connection, which watches the
		// Secret type with Istio's resource names and has ACKed it.
		waitFor(ctx, t, 10*time.Second, "the gateway's one connection ACKs its secrets", func() error {
			resp, err := http.Get("http://" + monAddr + "/debug/connections")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var cons []debugapi.ConnectionStatus
			if err := json.NewDecoder(resp.Body).Decode(&cons); err != nil {
				return err
			}
			if len(cons) != 1 {
				return fmt.Errorf("%d xDS connections, want the gateway's one: %+v", len(cons), cons)
			}
			for _, w := range cons[0].Watched {
				if w.TypeURL != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret" {
					continue
				}
				names := slices.Sorted(slices.Values(w.ResourceNames))
				if want := []string{"kubernetes://a-cred", "kubernetes://b-cred", "kubernetes://b-cred-cacert"}; !slices.Equal(names, want) {
					return fmt.Errorf("the gateway watches secrets %v, want %v", names, want)
				}
				if w.VersionAcked == "" || w.VersionAcked != w.VersionSent {
					return fmt.Errorf("secrets sent %q, ACKed %q", w.VersionSent, w.VersionAcked)
				}
				return nil
			}
			return errors.New("the gateway's connection watches no Secret type")
		})
		// straitd's config dump shows the secrets with their keys redacted.
		id := "router~" + pod.IP.String() + "~ingressgateway-1.gw~gw.svc.cluster.local"
		resp, err := http.Get("http://" + monAddr + "/debug/config_dump?proxyID=" + url.QueryEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		dump, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(dump), "kubernetes://a-cred") || !strings.Contains(string(dump), "[redacted]") ||
			strings.Contains(string(dump), base64.StdEncoding.EncodeToString(aKey)) {
			t.Errorf("config_dump (%d) of the gateway: want its secrets with the private keys redacted:\n%.600s", resp.StatusCode, dump)
		}
	})
	t.Run("plaintext server keeps working", func(t *testing.T) {
		if _, err := get(8080, "http", "anything.example.com", nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MUTUAL requires a client certificate from cacert", func(t *testing.T) {
		if _, err := get(8443, "https", "b.example.com", tlsFor("b.example.com", clientCert)); err != nil {
			t.Fatalf("with a client certificate: %v", err)
		}
		if _, err := get(8443, "https", "b.example.com", tlsFor("b.example.com")); err == nil {
			t.Fatal("without a client certificate the MUTUAL server answered")
		}
		if _, err := get(8443, "https", "b.example.com", tlsFor("b.example.com", revokedClient)); err == nil {
			t.Fatal("a client certificate that b-cred-cacert's crl revokes was accepted")
		}
		other := newTestIssuer(t, "other CA")
		oc, ok, _ := other.issue(t, "client.example.com", x509.ExtKeyUsageClientAuth)
		stranger, err := tls.X509KeyPair(oc, ok)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(8443, "https", "b.example.com", tlsFor("b.example.com", stranger)); err == nil {
			t.Fatal("a client certificate of another CA was accepted")
		}
	})
	t.Run("missing Secret means no filter chain, the others keep working", func(t *testing.T) {
		if _, err := get(9443, "https", "c.example.com", tlsFor("c.example.com")); err == nil {
			t.Fatal("c.example.com answered without its Secret")
		}
		if _, err := get(8443, "https", "a.example.com", tlsFor("a.example.com")); err != nil {
			t.Fatalf("a.example.com: %v", err)
		}
		cCert, cKey, cSerial := serverCA.issue(t, "c.example.com", x509.ExtKeyUsageServerAuth)
		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c-cred"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": cCert, "tls.key": cKey}})
		waitFor(ctx, t, 30*time.Second, "c.example.com served once c-cred exists", func() error {
			serial, err := get(9443, "https", "c.example.com", tlsFor("c.example.com"))
			if err == nil && serial != cSerial {
				return fmt.Errorf("certificate serial %d, want c-cred's %d", serial, cSerial)
			}
			return err
		})
	})
	t.Run("rotated Secret served without restart", func(t *testing.T) {
		newCert, newKey, newSerial := serverCA.issue(t, "a.example.com", x509.ExtKeyUsageServerAuth)
		s, err := secrets.Get(ctx, "a-cred", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"tls.crt": newCert, "tls.key": newKey}
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, 30*time.Second, "the rotated certificate of a-cred", func() error {
			serial, err := get(8443, "https", "a.example.com", tlsFor("a.example.com"))
			if err == nil && serial != newSerial {
				return fmt.Errorf("certificate serial %d, want the rotated %d", serial, newSerial)
			}
			return err
		})
		select {
		case <-agent.Done():
			t.Fatal("the gateway's agent exited")
		default:
		}
		if agent.Cmd.Process.Pid != agentPID {
			t.Fatal("the gateway was restarted")
		}
	})
	t.Run("malformed Secret removes the chain", func(t *testing.T) {
		s, err := secrets.Get(ctx, "c-cred", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data["tls.key"] = aKey // not c's key
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, 30*time.Second, "c.example.com refused with a mismatched key", func() error {
			if _, err := get(9443, "https", "c.example.com", tlsFor("c.example.com")); err == nil {
				return errors.New("c.example.com still answers")
			}
			return nil
		})
		if _, err := get(8443, "https", "a.example.com", tlsFor("a.example.com")); err != nil {
			t.Fatalf("a.example.com: %v", err)
		}
	})
	t.Run("deleted Secret removes the chain", func(t *testing.T) {
		if err := secrets.Delete(ctx, "a-cred", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, 30*time.Second, "a.example.com refused once a-cred is deleted", func() error {
			if _, err := get(8443, "https", "a.example.com", tlsFor("a.example.com")); err == nil {
				return errors.New("a.example.com still answers")
			}
			return nil
		})
		if _, err := get(8443, "https", "b.example.com", tlsFor("b.example.com", clientCert)); err != nil {
			t.Fatalf("b.example.com on the same port: %v", err)
		}
	})
}

// freeAddr is host:PORT with a port free at the time of the call.
func freeAddr(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
