package accesslog

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// peerCert is a client certificate as Istio's workloads carry one: a
// SPIFFE URI SAN, plus DNS, IP and email SANs to print.
func peerCert(t *testing.T) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("spiffe://cluster.local/ns/demo/sa/client")
	tmpl := &x509.Certificate{
		SerialNumber:   big.NewInt(0x0102ab),
		Subject:        pkix.Name{CommonName: "client", Organization: []string{"strait"}},
		NotBefore:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		NotAfter:       time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC),
		URIs:           []*url.URL{u},
		DNSNames:       []string{"client.demo", "c.demo"},
		IPAddresses:    []net.IP{net.ParseIP("10.1.0.9")},
		EmailAddresses: []string{"ops@demo"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// httpRecord is a request over a terminated TLS connection with x-forwarded-for.
func httpRecord(t *testing.T) *Record {
	r := sampleRecord()
	r.Request = HTTPHeader(http.Header{
		"User-Agent": {"curl/8"}, "X-Request-Id": {"abc"}, "Empty": {""},
		"X-Forwarded-For": {"10.0.0.1, 10.0.0.2"},
	})
	r.Flags = "URX,UF"
	r.Details = "upstream_reset_before_response_started{connection failure}"
	r.TransportFailure = "tls: bad certificate"
	r.TerminationDetails = "rbac_access_denied_matched_policy[none]"
	r.UpstreamStatName = "echo"
	r.UpstreamLocal = netip.MustParseAddrPort("10.1.0.5:45678")
	r.UpstreamRemote = netip.MustParseAddrPort("10.1.2.3:8080")
	r.DownstreamRemote = netip.MustParseAddrPort("10.0.0.2:0")
	r.Conn = &Conn{
		DirectLocal:  netip.MustParseAddrPort("10.1.0.5:15006"),
		DirectRemote: netip.MustParseAddrPort("10.1.0.9:41234"),
		SNI:          "outbound_.80_._.echo.demo.svc.cluster.local",
		TLS: &tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			PeerCertificates: []*x509.Certificate{peerCert(t)}},
	}
	return r
}

// tcpRecord is a tcp_proxy connection: no protocol, headers or code.
func tcpRecord() *Record {
	return &Record{
		Start:    time.Date(2026, 12, 1, 15, 4, 5, 678_000_000, time.UTC),
		Duration: 2500 * time.Millisecond, BytesReceived: 10, BytesSent: 20,
		UpstreamHost: "10.1.2.3:9000", UpstreamCluster: "outbound|9000||db.demo",
		UpstreamLocal:    netip.MustParseAddrPort("10.1.0.5:50000"),
		UpstreamRemote:   netip.MustParseAddrPort("10.1.2.3:9000"),
		DownstreamLocal:  netip.MustParseAddrPort("240.240.0.2:9000"),
		DownstreamRemote: netip.MustParseAddrPort("10.1.0.9:40000"),
		Conn: &Conn{DirectLocal: netip.MustParseAddrPort("127.0.0.1:15001"), DirectRemote: netip.MustParseAddrPort("10.1.0.9:40000"),
			SNI: "db.example.com"},
	}
}

var opName = regexp.MustCompile(`%([A-Z0-9_]+)`)

// TestEveryOperator prints every operator strait-proxy accepts for an
// HTTP record and a TCP one, and fails when an operator of the table has
// no row here.
func TestEveryOperator(t *testing.T) {
	t.Setenv("STRAIT_TEST_POD", "client-7d4")
	host, _ := os.Hostname()
	hr := httpRecord(t)
	cert := hr.Conn.TLS.PeerCertificates[0]
	sum256, sum1 := sha256.Sum256(cert.Raw), sha1.Sum(cert.Raw)
	type row struct{ format, http, tcp string }
	rows := []row{
		{"%START_TIME%", "2026-12-01T15:04:05.678Z", "2026-12-01T15:04:05.678Z"},
		{"%REQ(USER-AGENT)%", "curl/8", "-"},
		{"%REQUEST_HEADER(X-MISSING?USER-AGENT):4%", "curl", "-"},
		{"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%", "7", "-"},
		{"%RESPONSE_HEADER(:STATUS)%", "503", "-"},
		{"%PROTOCOL%", "HTTP/1.1", "-"},
		{"%RESPONSE_CODE%", "503", "0"},
		{"%RESPONSE_FLAGS%", "URX,UF", "-"},
		{"%RESPONSE_FLAGS_LONG%", "UpstreamRetryLimitExceeded,UpstreamConnectionFailure", "-"},
		{"%RESPONSE_CODE_DETAILS%", "upstream_reset_before_response_started{connection_failure}", "-"},
		{"%RESPONSE_CODE_DETAILS(ALLOW_WHITESPACES)%", "upstream_reset_before_response_started{connection failure}", "-"},
		{"%CONNECTION_TERMINATION_DETAILS%", "rbac_access_denied_matched_policy[none]", "-"},
		{"%UPSTREAM_TRANSPORT_FAILURE_REASON%", "tls:_bad_certificate", "-"},
		{"%BYTES_RECEIVED% %BYTES_SENT%", "5 91", "10 20"},
		{"%DURATION%", "12", "2500"},
		{"%UPSTREAM_HOST%", "10.1.2.3:8080", "10.1.2.3:9000"},
		{"%UPSTREAM_CLUSTER%", "echo", "outbound|9000||db.demo"},
		{"%UPSTREAM_CLUSTER_RAW%", "outbound|80||echo.demo", "outbound|9000||db.demo"},
		{"%UPSTREAM_LOCAL_ADDRESS%", "10.1.0.5:45678", "10.1.0.5:50000"},
		{"%UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%", "10.1.0.5", "10.1.0.5"},
		{"%UPSTREAM_LOCAL_PORT%", "45678", "50000"},
		{"%UPSTREAM_REMOTE_ADDRESS%", "10.1.2.3:8080", "10.1.2.3:9000"},
		{"%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", "10.1.2.3", "10.1.2.3"},
		{"%UPSTREAM_REMOTE_PORT%", "8080", "9000"},
		{"%DOWNSTREAM_LOCAL_ADDRESS%", "240.240.0.1:80", "240.240.0.2:9000"},
		{"%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%", "240.240.0.1", "240.240.0.2"},
		{"%DOWNSTREAM_LOCAL_PORT%", "80", "9000"},
		{"%DOWNSTREAM_REMOTE_ADDRESS%", "10.0.0.2:0", "10.1.0.9:40000"},
		{"%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", "10.0.0.2", "10.1.0.9"},
		{"%DOWNSTREAM_REMOTE_PORT%", "0", "40000"},
		{"%DOWNSTREAM_DIRECT_LOCAL_ADDRESS%", "10.1.0.5:15006", "127.0.0.1:15001"},
		{"%DOWNSTREAM_DIRECT_LOCAL_ADDRESS_WITHOUT_PORT%", "10.1.0.5", "127.0.0.1"},
		{"%DOWNSTREAM_DIRECT_LOCAL_PORT%", "15006", "15001"},
		{"%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%", "10.1.0.9:41234", "10.1.0.9:40000"},
		{"%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%", "10.1.0.9", "10.1.0.9"},
		{"%DOWNSTREAM_DIRECT_REMOTE_PORT%", "41234", "40000"},
		{"%REQUESTED_SERVER_NAME%", "outbound_.80_._.echo.demo.svc.cluster.local", "db.example.com"},
		{"%ROUTE_NAME%", "default", "-"},
		{"%HOSTNAME%", host, host},
		{"%ENVIRONMENT(STRAIT_TEST_POD)% %ENVIRONMENT(STRAIT_TEST_POD):6% %ENVIRONMENT(STRAIT_TEST_UNSET)%", "client-7d4 client -", "client-7d4 client -"},
		{"%DOWNSTREAM_TLS_VERSION%", "TLSv1.2", "-"},
		{"%DOWNSTREAM_TLS_CIPHER%", "ECDHE-ECDSA-AES128-GCM-SHA256", "-"},
		{"%DOWNSTREAM_PEER_URI_SAN%", "spiffe://cluster.local/ns/demo/sa/client", "-"},
		{"%DOWNSTREAM_PEER_DNS_SAN%", "client.demo,c.demo", "-"},
		{"%DOWNSTREAM_PEER_IP_SAN%", "10.1.0.9", "-"},
		{"%DOWNSTREAM_PEER_EMAIL_SAN%", "ops@demo", "-"},
		{"%DOWNSTREAM_PEER_SUBJECT%", "CN=client,O=strait", "-"},
		{"%DOWNSTREAM_PEER_ISSUER%", "CN=client,O=strait", "-"},
		{"%DOWNSTREAM_PEER_SERIAL%", "0102ab", "-"},
		{"%DOWNSTREAM_PEER_FINGERPRINT_256%", hex.EncodeToString(sum256[:]), "-"},
		{"%DOWNSTREAM_PEER_FINGERPRINT_1%", hex.EncodeToString(sum1[:]), "-"},
		{"%DOWNSTREAM_PEER_CERT_V_START%", "2026-01-02T03:04:05.000Z", "-"},
		{"%DOWNSTREAM_PEER_CERT_V_END(%Y/%m/%d)%", "2027/01/02", "-"},
	}
	covered := map[string]bool{}
	for _, tc := range rows {
		f, err := ParseText(tc.format)
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		for _, m := range opName.FindAllStringSubmatch(tc.format, -1) {
			covered[m[1]] = true
		}
		if got := string(f.Append(nil, hr)); got != tc.http {
			t.Errorf("HTTP %s: %q, want %q", tc.format, got, tc.http)
		}
		if got := string(f.Append(nil, tcpRecord())); got != tc.tcp {
			t.Errorf("TCP %s: %q, want %q", tc.format, got, tc.tcp)
		}
	}
	// Operators whose value is not fixed: their shape.
	for format, re := range map[string]string{
		"%EMIT_TIME(%s)%":        `^\d{10}$`,
		"%UNIQUE_ID%":            `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`,
		"%DOWNSTREAM_PEER_CERT%": `^-----BEGIN%20CERTIFICATE-----%0A[A-Za-z0-9%]+%0A-----END%20CERTIFICATE-----%0A$`,
	} {
		f, err := ParseText(format)
		if err != nil {
			t.Fatal(err)
		}
		covered[format[1:strings.IndexAny(format[1:], "(%")+1]] = true
		if got := string(f.Append(nil, hr)); !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("%s: %q does not match %s", format, got, re)
		}
		if got := string(f.Append(nil, tcpRecord())); format == "%DOWNSTREAM_PEER_CERT%" && got != "-" {
			t.Errorf("TCP %s: %q, want -", format, got)
		}
	}
	f, _ := ParseText("%UNIQUE_ID%")
	if first, second := f.Append(nil, hr), f.Append(nil, hr); string(first) == string(second) {
		t.Error("UNIQUE_ID repeats")
	}
	for name := range operators {
		if !covered[name] {
			t.Errorf("operator %s has no row in this test", name)
		}
	}
}

// TestEnvoyOperatorsRefusedByName: every Envoy operator strait-proxy does
// not fill is refused, naming it, never printed as "-".
func TestEnvoyOperatorsRefusedByName(t *testing.T) {
	for name := range notImplemented {
		if _, ok := operators[name]; ok {
			t.Errorf("%s is both implemented and refused", name)
		}
		format := "%" + name + "%"
		if name == "DYNAMIC_METADATA" || name == "FILTER_STATE" || name == "ENVIRONMENT" {
			format = "%" + name + "(x)%"
		}
		_, err := ParseText(format)
		if err == nil || !strings.Contains(err.Error(), "%"+name+"% is not supported by strait-proxy") {
			t.Errorf("%s: %v", format, err)
		}
	}
}

func TestStartTimeFormats(t *testing.T) {
	r := &Record{Start: time.Date(2026, 3, 7, 9, 5, 4, 123_456_789, time.FixedZone("X", 3600))}
	for format, want := range map[string]string{
		"%START_TIME(%Y/%m/%dT%H:%M:%S%z %s)%": "2026/03/07T08:05:04+0000 1772870704",
		"%START_TIME(%s.%3f)%":                 "1772870704.123",
		"%START_TIME(%s.%6f)%":                 "1772870704.123456",
		"%START_TIME(%s.%9f|%f)%":              "1772870704.123456789|123456789",
		"%START_TIME(%1f %y %j %e %a %A %b %h %B %p %I %T %D %F %R %Z %C %u %w %k %l %% %t)%": "1 26 066  7 Sat Saturday Mar Mar March AM 08 08:05:04 03/07/26 2026-03-07 08:05 UTC 20 6 6  8  8 % \t",
		"[%START_TIME()%]": "[2026-03-07T08:05:04.123Z]",
	} {
		f, err := ParseText(format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if got := string(f.Append(nil, r)); got != want {
			t.Errorf("%s: %q, want %q", format, got, want)
		}
	}
	for _, format := range []string{"%START_TIME(%)%", "%START_TIME(%Ez)%", "%START_TIME(%c)%"} {
		if _, err := ParseText(format); err == nil || !strings.Contains(err.Error(), "%START_TIME(") {
			t.Errorf("%s: %v, want a refusal naming it", format, err)
		}
	}
}

// TestJSONTypedValues: ports and counts are numbers, absent values null,
// RESPONSE_FLAGS and an unset ENVIRONMENT the string "-".
func TestJSONTypedValues(t *testing.T) {
	st, err := structpb.NewStruct(map[string]any{
		"up_port": "%UPSTREAM_LOCAL_PORT%", "down_port": "%DOWNSTREAM_REMOTE_PORT%", "code": "%RESPONSE_CODE%",
		"sni": "%REQUESTED_SERVER_NAME%", "flags": "%RESPONSE_FLAGS%", "env": "%ENVIRONMENT(STRAIT_TEST_UNSET)%",
		"up": "%UPSTREAM_LOCAL_ADDRESS%", "mixed": "%UPSTREAM_LOCAL_PORT%/%ROUTE_NAME%", "empty": "%REQ(EMPTY)%",
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	r := tcpRecord()
	r.UpstreamLocal = netip.AddrPort{}
	r.Conn = nil
	r.Request = HTTPHeader(http.Header{"Empty": {""}})
	var got map[string]any
	if err := json.Unmarshal(f.Append(nil, r), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"up_port": nil, "down_port": 40000.0, "code": 0.0, "sni": nil, "flags": "-", "env": "-", "up": nil, "mixed": "-/-", "empty": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

// FuzzParseText: any format string either is refused or compiles into
// one that formats any record without panicking; a format without '%'
// prints itself.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{istioText, DefaultFormat, "%START_TIME(%s.%3f)%", "%REQ(A?B):3%", "%%", "%", "%REQ(", "%ENVIRONMENT(HOME):2%", "%START_TIME(%9f%"} {
		f.Add(s)
	}
	r := sampleRecord()
	f.Fuzz(func(t *testing.T, s string) {
		fm, err := ParseText(s)
		if err != nil {
			return
		}
		got := string(fm.Append(nil, r))
		fm.Append(nil, &Record{})
		fm.Append(nil, tcpRecord())
		if !strings.Contains(s, "%") && got != s {
			t.Errorf("%q printed %q", s, got)
		}
	})
}
