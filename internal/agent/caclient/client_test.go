package caclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca"
)

// recorder is a CA that answers with a fixed chain and records the
// authorization metadata of each request.
type recorder struct {
	pb.UnimplementedIstioCertificateServiceServer
	auth  chan string
	chain []string
}

func (r *recorder) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.auth <- strings.Join(md.Get("authorization"), ",") + " ttl=" + strconv.FormatInt(req.GetValidityDuration(), 10)
	return &pb.IstioCertificateResponse{CertChain: r.chain}, nil
}

func TestSignSendsTheCurrentToken(t *testing.T) {
	rec := &recorder{auth: make(chan string, 4), chain: []string{"leaf", "root"}}
	g := grpc.NewServer()
	pb.RegisterIstioCertificateServiceServer(g, rec)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // ends with Stop
	defer g.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	tokPath := filepath.Join(t.TempDir(), "istio-token")
	c, err := New(Options{Conn: cc, TokenPath: tokPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Sign(ctx, []byte("csr"), 0); err == nil || !strings.Contains(err.Error(), "straitctl token create") {
		t.Fatalf("without a token file: %v", err)
	}
	for _, tok := range []string{"first", "second"} { // the kubelet rotates the file
		if err := os.WriteFile(tokPath, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		chain, err := c.Sign(ctx, []byte("csr"), 5_000_000_000) // 5 s
		if err != nil || len(chain) != 2 {
			t.Fatalf("sign: %v %v", chain, err)
		}
		if got := <-rec.auth; got != "Bearer "+tok+" ttl=5" {
			t.Errorf("request carried %q, want Bearer %s and 5 s", got, tok)
		}
	}
	rec.chain = []string{"only-leaf"}
	if _, err := c.Sign(ctx, []byte("csr"), 0); err == nil || !strings.Contains(err.Error(), "1 certificates") {
		t.Errorf("a one-element chain: %v", err)
	}
}

func TestTransportCredentialsErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := TransportCredentials(TLSOptions{Addr: "straitd:15012", RootPath: filepath.Join(dir, "missing.pem")}); err == nil || !strings.Contains(err.Error(), "XDS_ROOT_CA") {
		t.Errorf("missing root: %v", err)
	}
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := TransportCredentials(TLSOptions{Addr: "straitd:15012", RootPath: bad}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("bad root: %v", err)
	}
}

func TestTokenCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "istio-token")
	c := TokenCredentials{Path: path}
	if !c.RequireTransportSecurity() {
		t.Error("the token would be sent over plaintext")
	}
	md, err := c.GetRequestMetadata(context.Background())
	if err != nil || len(md) != 0 {
		t.Fatalf("no token file: %v %v, want no header", md, err)
	}
	if err := os.WriteFile(path, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	md, err = c.GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer tok" {
		t.Fatalf("with a token: %v %v", md, err)
	}
}

// TestTransportCredentialsServerName dials a TLS CA whose certificate names
// only istiod.istio-system.svc at 127.0.0.1: refused by default (the IP is
// not in the certificate), accepted with ISTIOD_SAN's server name.
func TestTransportCredentialsServerName(t *testing.T) {
	dir := t.TempDir()
	authority, err := ca.Load(ca.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ca.NewServingCert(authority, ca.ServingOptions{DNSNames: []string{"istiod.istio-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{auth: make(chan string, 4), chain: []string{"leaf", "root"}}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{GetCertificate: sc.GetCertificate})))
	pb.RegisterIstioCertificateServiceServer(g, rec)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // ends with Stop
	defer g.Stop()
	root := filepath.Join(dir, ca.RootCertFile)
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A root the server does not chain to: the agent's file after the
	// mesh root was rotated away from under it.
	old, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := filepath.Join(dir, "old-root.pem")
	if err := os.WriteFile(oldRoot, old.TrustBundle(), 0o644); err != nil {
		t.Fatal(err)
	}
	current := func() []*x509.Certificate { return authority.Roots() }
	const name = "istiod.istio-system.svc"
	for _, tt := range []struct {
		root, serverName string
		extra            func() []*x509.Certificate
		ok               bool
	}{
		{root, "", nil, false},            // 127.0.0.1 is not in the certificate
		{root, name, nil, true},           // ISTIOD_SAN
		{root, name, current, true},       // the verifying callback accepts what crypto/tls does
		{root, "", current, false},        // and checks the name too
		{oldRoot, name, nil, false},       // a stale root file alone
		{oldRoot, name, current, true},    // plus the bundle of the latest certificate
		{oldRoot, name, old.Roots, false}, // extra roots that are not the server's
	} {
		creds, err := TransportCredentials(TLSOptions{Addr: lis.Addr().String(), RootPath: tt.root, ServerName: tt.serverName, ExtraRoots: tt.extra})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := New(Options{Conn: cc, TokenPath: tok})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = c.Sign(ctx, []byte("csr"), 0)
		cancel()
		cc.Close()
		if (err == nil) != tt.ok {
			t.Errorf("root %s, server name %q, extra roots %v: %v, want ok=%v", filepath.Base(tt.root), tt.serverName, tt.extra != nil, err, tt.ok)
		}
	}
}
