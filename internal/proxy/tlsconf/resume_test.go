package tlsconf

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// resumePair is a client and a server socket with their SDS servers and
// one listener, so that the client's sessions (keyed by its SNI) can be
// offered to the same server again.
type resumePair struct {
	client         *Client
	server         *Server
	cliSDS, srvSDS *fakeSDS
	ca             *testCA
	lis            net.Listener
}

// resumed is what one connection of a resumePair saw on both sides.
type resumed struct {
	client, server tls.ConnectionState
	clientPeer     string // UpstreamPrincipals' peer and local
	clientLocal    string
	serverLocal    string // LocalCertificate's first URI SAN
}

func newResumePair(t testing.TB, maxKeys *wrapperspb.UInt32Value, noTickets bool) *resumePair {
	t.Helper()
	ca := newCA(t)
	srvSDS, cliSDS := startSDS(t), startSDS(t)
	c, k, _ := ca.issue(t, serverID)
	srvSDS.set(c, k, ca.pem)
	c, k, _ = ca.issue(t, clientID)
	cliSDS.set(c, k, ca.pem)
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{
		CommonTlsContext: istioCommon([]string{"istio-peer-exchange", "istio"}, serverID),
		Sni:              "outbound_.8080_._.server.default.svc.cluster.local",
		MaxSessionKeys:   maxKeys,
	}), provider(t, cliSDS))
	if err != nil {
		t.Fatal(err)
	}
	d := &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         istioCommon([]string{"istio-peer-exchange", "istio"}, clientID),
		RequireClientCertificate: wrapperspb.Bool(true),
	}
	if noTickets {
		d.SessionTicketKeysType = &tlsv3.DownstreamTlsContext_DisableStatelessSessionResumption{DisableStatelessSessionResumption: true}
	}
	srv, err := NewServer(socket(t, d), provider(t, srvSDS))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return &resumePair{client: cl, server: srv, cliSDS: cliSDS, srvSDS: srvSDS, ca: ca, lis: lis}
}

// conn makes one connection, exchanges a message (which delivers the
// server's session ticket to the client) and reports both sides' states.
func (p *resumePair) conn(t testing.TB) resumed {
	t.Helper()
	r, _ := p.connServer(t, false)
	return r
}

// connServer is conn, also returning the server's side of the connection
// when keep says so (open; the test closes it).
func (p *resumePair) connServer(t testing.TB, keep bool) (resumed, *ServerConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type srvResult struct {
		st    tls.ConnectionState
		local string
		sc    *ServerConn
		err   error
	}
	srvDone := make(chan srvResult, 1)
	go func() {
		c, err := p.lis.Accept()
		if err != nil {
			srvDone <- srvResult{err: err}
			return
		}
		sc, err := p.server.Handshake(ctx, c)
		if err != nil {
			srvDone <- srvResult{err: err}
			return
		}
		if keep {
			t.Cleanup(func() { sc.Close() })
		} else {
			defer sc.Close()
		}
		var b [4]byte
		if _, err := io.ReadFull(sc, b[:]); err != nil {
			srvDone <- srvResult{err: err}
			return
		}
		_, err = sc.Write(b[:])
		srvDone <- srvResult{st: sc.ConnectionState(), local: firstURI(LocalCertificate(sc)), sc: sc, err: err}
	}()
	raw, err := net.Dial("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := p.client.Handshake(ctx, raw)
	if err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	defer cc.Close()
	if _, err := cc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if _, err := io.ReadFull(cc, b[:]); err != nil {
		t.Fatalf("client read: %v", err)
	}
	sr := <-srvDone
	if sr.err != nil {
		t.Fatalf("server: %v", sr.err)
	}
	peer, local := UpstreamPrincipals(cc)
	r := resumed{client: cc.ConnectionState(), server: sr.st, clientPeer: peer, clientLocal: local, serverLocal: sr.local}
	if !keep {
		return r, nil
	}
	return r, sr.sc
}

// ResumedServerConnsForTest returns the server sides of two connections
// between a new client and server socket pair with mutual TLS (client
// identity ClientIDForTest): the first a full handshake, the second
// resumed. For the tests of what reads a terminated connection's peer
// (resume_rbac_test.go).
func ResumedServerConnsForTest(t *testing.T) (fullConn, resumedConn net.Conn) {
	t.Helper()
	p := newResumePair(t, nil, false)
	r1, c1 := p.connServer(t, true)
	r2, c2 := p.connServer(t, true)
	if r1.server.DidResume || !r2.server.DidResume {
		t.Fatalf("resumed: first %v second %v, want false, true", r1.server.DidResume, r2.server.DidResume)
	}
	return c1, c2
}

// ClientIDForTest is the client identity of ResumedServerConnsForTest.
const ClientIDForTest = clientID

// check fails unless the connection did (or did not) resume on both sides
// and carries both identities as a full handshake does.
func (r resumed) check(t testing.TB, what string, wantResume bool) {
	t.Helper()
	if r.client.DidResume != wantResume || r.server.DidResume != wantResume {
		t.Fatalf("%s: resumed client %v server %v, want %v", what, r.client.DidResume, r.server.DidResume, wantResume)
	}
	if len(r.server.PeerCertificates) == 0 || firstURI(r.server.PeerCertificates[0]) != clientID {
		t.Fatalf("%s: the server sees peer certificates %d, want the client's (%s), which RBAC and XFCC read", what, len(r.server.PeerCertificates), clientID)
	}
	if r.clientPeer != serverID || r.clientLocal != clientID {
		t.Fatalf("%s: upstream principals %q, %q; want %s, %s", what, r.clientPeer, r.clientLocal, serverID, clientID)
	}
	if r.serverLocal != serverID {
		t.Fatalf("%s: the server's local certificate %q, want %s (XFCC By)", what, r.serverLocal, serverID)
	}
}

// TestSessionResumption: a second connection between the same sockets
// resumes, with both identities as on the first; after the client's or
// the server's certificate rotates (SDS), the next connection is a full
// handshake presenting the new one; no resumption with max_session_keys 0
// or disable_stateless_session_resumption.
func TestSessionResumption(t *testing.T) {
	t.Run("resumes", func(t *testing.T) {
		p := newResumePair(t, nil, false)
		p.conn(t).check(t, "first connection", false)
		p.conn(t).check(t, "second connection", true)
		p.conn(t).check(t, "third connection", true)
	})
	t.Run("client certificate rotates", func(t *testing.T) {
		p := newResumePair(t, nil, false)
		p.conn(t).check(t, "first connection", false)
		p.conn(t).check(t, "second connection", true)
		c, k, serial := p.ca.issue(t, clientID)
		p.cliSDS.set(c, k, p.ca.pem)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := p.conn(t)
			if got := r.server.PeerCertificates[0].SerialNumber.Int64(); got == serial {
				r.check(t, "first connection with the rotated certificate", false)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server still sees the client's old certificate after its rotation")
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.conn(t).check(t, "second connection with the rotated certificate", true)
	})
	t.Run("server certificate rotates", func(t *testing.T) {
		p := newResumePair(t, nil, false)
		p.conn(t).check(t, "first connection", false)
		c, k, serial := p.ca.issue(t, serverID)
		p.srvSDS.set(c, k, p.ca.pem)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := p.conn(t)
			if got := r.client.PeerCertificates[0].SerialNumber.Int64(); got == serial {
				r.check(t, "first connection with the rotated certificate", false)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the client still sees the server's old certificate after its rotation")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("max_session_keys 0", func(t *testing.T) {
		p := newResumePair(t, wrapperspb.UInt32(0), false)
		p.conn(t).check(t, "first connection", false)
		p.conn(t).check(t, "second connection", false)
	})
	t.Run("disable_stateless_session_resumption", func(t *testing.T) {
		p := newResumePair(t, nil, true)
		p.conn(t).check(t, "first connection", false)
		p.conn(t).check(t, "second connection", false)
	})
}

// TestResumedSessionVerifiedAgain: a session whose peer the current trust
// no longer accepts (here: the server's trust bundle rotated to another
// CA) is refused rather than resumed.
func TestResumedSessionVerifiedAgain(t *testing.T) {
	p := newResumePair(t, nil, false)
	p.conn(t).check(t, "first connection", false)
	// The server's own certificate stays; only the bundle it trusts
	// clients with changes to another CA's, so its tickets still name its
	// certificate.
	other := newCA(t)
	p.srvSDS.mu.Lock()
	chain, key := p.srvSDS.chain, p.srvSDS.key
	p.srvSDS.mu.Unlock()
	acks := p.srvSDS.acks.Load()
	p.srvSDS.set(chain, key, other.pem)
	deadline := time.Now().Add(10 * time.Second)
	for p.srvSDS.acks.Load() <= acks {
		if time.Now().After(deadline) {
			t.Fatal("the server did not take the new trust bundle")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		c, err := p.lis.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		sc, err := p.server.Handshake(ctx, c)
		if err == nil {
			st := sc.ConnectionState()
			sc.Close()
			if st.DidResume {
				srvErr <- nil
				return
			}
		}
		srvErr <- err
	}()
	raw, err := net.Dial("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if cc, err := p.client.Handshake(ctx, raw); err == nil {
		// TLS 1.3: the client may finish before the server refuses.
		var b [1]byte
		_, _ = cc.Read(b[:])
		cc.Close()
	}
	if err := <-srvErr; err == nil {
		t.Fatal("the server resumed a session whose client its current trust bundle does not accept")
	}
}

// BenchmarkHandshake is the CPU of one mutual-TLS connection between a
// client and a server socket (both sides, over loopback, one message
// each way), with a full handshake and with a resumed one: cpu-ns/op is
// the process's user and system time per connection, and 1e9 / cpu-ns/op
// connections per core.
func BenchmarkHandshake(b *testing.B) {
	for _, bc := range []struct {
		name    string
		maxKeys *wrapperspb.UInt32Value
	}{{"full", wrapperspb.UInt32(0)}, {"resumed", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			p := newResumePair(b, bc.maxKeys, false)
			p.conn(b) // the first session
			c0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				if r := p.conn(b); r.server.DidResume != (bc.maxKeys == nil) {
					b.Fatalf("resumed %v", r.server.DidResume)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTLSOverRawIO: both sides of a TLS connection read and write the
// socket through the raw non-blocking I/O of the HTTP/1.1 path
// (http1.WrapConn), as plaintext connections do.
func TestTLSOverRawIO(t *testing.T) {
	p := newResumePair(t, nil, false)
	_, sc := p.connServer(t, true)
	if http1.RawSyscallConn(sc.NetConn().(*tls.Conn).NetConn()) == nil {
		t.Error("the server side's TLS runs over a net.Conn without the raw socket I/O")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if c, err := p.lis.Accept(); err == nil {
			if sc, err := p.server.Handshake(ctx, c); err == nil {
				sc.Close()
			}
		}
	}()
	raw, err := net.Dial("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := p.client.Handshake(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if http1.RawSyscallConn(cc.Conn.NetConn()) == nil {
		t.Error("the client side's TLS runs over a net.Conn without the raw socket I/O")
	}
}
