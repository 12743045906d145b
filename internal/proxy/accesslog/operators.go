package accesslog

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// op is one command operator.
type op uint8

const (
	opLiteral op = iota
	opConst      // a value fixed when the format is compiled (HOSTNAME, ENVIRONMENT)
	opStartTime
	opEmitTime
	opReq
	opResp
	opProtocol
	opResponseCode
	opResponseFlags
	opResponseFlagsLong
	opResponseCodeDetails
	opConnectionTerminationDetails
	opUpstreamTransportFailureReason
	opBytesReceived
	opBytesSent
	opDuration
	opUpstreamHost
	opUpstreamCluster
	opUpstreamClusterRaw
	opUpstreamLocalAddress
	opUpstreamRemoteAddress
	opDownstreamLocalAddress
	opDownstreamRemoteAddress
	opDownstreamDirectLocalAddress
	opDownstreamDirectRemoteAddress
	opRequestedServerName
	opRouteName
	opUniqueID
	opTLSVersion
	opTLSCipher
	opPeerURISAN
	opPeerDNSSAN
	opPeerIPSAN
	opPeerEmailSAN
	opPeerSubject
	opPeerIssuer
	opPeerSerial
	opPeerFingerprint256
	opPeerFingerprint1
	opPeerCert
	opPeerCertVStart
	opPeerCertVEnd
)

// addrPart is which part of an address an address operator prints
// (Envoy's ..._ADDRESS, ..._ADDRESS_WITHOUT_PORT and ..._PORT).
type addrPart uint8

const (
	withPort addrPart = iota
	withoutPort
	justPort
)

// argKind is whether an operator takes a (parenthesised) argument.
type argKind uint8

const (
	argNone argKind = iota
	argOptional
	argRequired
)

// opSpec is an operator's syntax: its argument and whether a length
// limit (:N) may follow, as Envoy's CommandSyntaxChecker checks them.
type opSpec struct {
	op     op
	part   addrPart
	arg    argKind
	length bool
}

// operators are the command operators strait-proxy fills, with Envoy's
// semantics (source/common/formatter/stream_info_formatter.cc and
// http_specific_formatter.cc); any other is refused by name when the
// config is loaded.
var operators = map[string]opSpec{
	"START_TIME":                     {op: opStartTime, arg: argOptional},
	"EMIT_TIME":                      {op: opEmitTime, arg: argOptional},
	"REQ":                            {op: opReq, arg: argRequired, length: true},
	"REQUEST_HEADER":                 {op: opReq, arg: argRequired, length: true},
	"RESP":                           {op: opResp, arg: argRequired, length: true},
	"RESPONSE_HEADER":                {op: opResp, arg: argRequired, length: true},
	"PROTOCOL":                       {op: opProtocol},
	"RESPONSE_CODE":                  {op: opResponseCode},
	"RESPONSE_FLAGS":                 {op: opResponseFlags},
	"RESPONSE_FLAGS_LONG":            {op: opResponseFlagsLong},
	"RESPONSE_CODE_DETAILS":          {op: opResponseCodeDetails, arg: argOptional},
	"CONNECTION_TERMINATION_DETAILS": {op: opConnectionTerminationDetails},
	// Go's error text where Envoy has OpenSSL's; spaces become '_' as in
	// Envoy.
	"UPSTREAM_TRANSPORT_FAILURE_REASON":             {op: opUpstreamTransportFailureReason},
	"BYTES_RECEIVED":                                {op: opBytesReceived},
	"BYTES_SENT":                                    {op: opBytesSent},
	"DURATION":                                      {op: opDuration},
	"UPSTREAM_HOST":                                 {op: opUpstreamHost},
	"UPSTREAM_CLUSTER":                              {op: opUpstreamCluster},
	"UPSTREAM_CLUSTER_RAW":                          {op: opUpstreamClusterRaw},
	"UPSTREAM_LOCAL_ADDRESS":                        {op: opUpstreamLocalAddress},
	"UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":           {op: opUpstreamLocalAddress, part: withoutPort},
	"UPSTREAM_LOCAL_PORT":                           {op: opUpstreamLocalAddress, part: justPort},
	"UPSTREAM_REMOTE_ADDRESS":                       {op: opUpstreamRemoteAddress},
	"UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":          {op: opUpstreamRemoteAddress, part: withoutPort},
	"UPSTREAM_REMOTE_PORT":                          {op: opUpstreamRemoteAddress, part: justPort},
	"DOWNSTREAM_LOCAL_ADDRESS":                      {op: opDownstreamLocalAddress},
	"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":         {op: opDownstreamLocalAddress, part: withoutPort},
	"DOWNSTREAM_LOCAL_PORT":                         {op: opDownstreamLocalAddress, part: justPort},
	"DOWNSTREAM_REMOTE_ADDRESS":                     {op: opDownstreamRemoteAddress},
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":        {op: opDownstreamRemoteAddress, part: withoutPort},
	"DOWNSTREAM_REMOTE_PORT":                        {op: opDownstreamRemoteAddress, part: justPort},
	"DOWNSTREAM_DIRECT_LOCAL_ADDRESS":               {op: opDownstreamDirectLocalAddress},
	"DOWNSTREAM_DIRECT_LOCAL_ADDRESS_WITHOUT_PORT":  {op: opDownstreamDirectLocalAddress, part: withoutPort},
	"DOWNSTREAM_DIRECT_LOCAL_PORT":                  {op: opDownstreamDirectLocalAddress, part: justPort},
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS":              {op: opDownstreamDirectRemoteAddress},
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT": {op: opDownstreamDirectRemoteAddress, part: withoutPort},
	"DOWNSTREAM_DIRECT_REMOTE_PORT":                 {op: opDownstreamDirectRemoteAddress, part: justPort},
	"REQUESTED_SERVER_NAME":                         {op: opRequestedServerName},
	"ROUTE_NAME":                                    {op: opRouteName},
	"HOSTNAME":                                      {op: opConst},
	"ENVIRONMENT":                                   {op: opConst, arg: argRequired, length: true},
	"UNIQUE_ID":                                     {op: opUniqueID},
	"DOWNSTREAM_TLS_VERSION":                        {op: opTLSVersion},
	"DOWNSTREAM_TLS_CIPHER":                         {op: opTLSCipher},
	"DOWNSTREAM_PEER_URI_SAN":                       {op: opPeerURISAN},
	"DOWNSTREAM_PEER_DNS_SAN":                       {op: opPeerDNSSAN},
	"DOWNSTREAM_PEER_IP_SAN":                        {op: opPeerIPSAN},
	"DOWNSTREAM_PEER_EMAIL_SAN":                     {op: opPeerEmailSAN},
	"DOWNSTREAM_PEER_SUBJECT":                       {op: opPeerSubject},
	"DOWNSTREAM_PEER_ISSUER":                        {op: opPeerIssuer},
	"DOWNSTREAM_PEER_SERIAL":                        {op: opPeerSerial},
	"DOWNSTREAM_PEER_FINGERPRINT_256":               {op: opPeerFingerprint256},
	"DOWNSTREAM_PEER_FINGERPRINT_1":                 {op: opPeerFingerprint1},
	"DOWNSTREAM_PEER_CERT":                          {op: opPeerCert},
	"DOWNSTREAM_PEER_CERT_V_START":                  {op: opPeerCertVStart, arg: argOptional},
	"DOWNSTREAM_PEER_CERT_V_END":                    {op: opPeerCertVEnd, arg: argOptional},
}

// notImplemented are Envoy's other command operators: refused by name
// with what they would need, so that a format using one is a config
// error rather than a column of "-".
var notImplemented = map[string]string{
	"START_TIME_LOCAL":                              "local-time formatting",
	"EMIT_TIME_LOCAL":                               "local-time formatting",
	"REQUEST_DURATION":                              "request and response timings",
	"REQUEST_TX_DURATION":                           "request and response timings",
	"RESPONSE_DURATION":                             "request and response timings",
	"RESPONSE_TX_DURATION":                          "request and response timings",
	"DOWNSTREAM_HANDSHAKE_DURATION":                 "request and response timings",
	"ROUNDTRIP_DURATION":                            "request and response timings",
	"COMMON_DURATION":                               "request and response timings",
	"UPSTREAM_CONNECTION_POOL_READY_DURATION":       "request and response timings",
	"REQUEST_HEADERS_BYTES":                         "header byte counts",
	"RESPONSE_HEADERS_BYTES":                        "header byte counts",
	"RESPONSE_TRAILERS_BYTES":                       "header byte counts",
	"UPSTREAM_WIRE_BYTES_SENT":                      "wire byte counts",
	"UPSTREAM_WIRE_BYTES_RECEIVED":                  "wire byte counts",
	"UPSTREAM_HEADER_BYTES_SENT":                    "wire byte counts",
	"UPSTREAM_HEADER_BYTES_RECEIVED":                "wire byte counts",
	"UPSTREAM_DECOMPRESSED_HEADER_BYTES_SENT":       "wire byte counts",
	"UPSTREAM_DECOMPRESSED_HEADER_BYTES_RECEIVED":   "wire byte counts",
	"DOWNSTREAM_WIRE_BYTES_SENT":                    "wire byte counts",
	"DOWNSTREAM_WIRE_BYTES_RECEIVED":                "wire byte counts",
	"DOWNSTREAM_HEADER_BYTES_SENT":                  "wire byte counts",
	"DOWNSTREAM_HEADER_BYTES_RECEIVED":              "wire byte counts",
	"DOWNSTREAM_DECOMPRESSED_HEADER_BYTES_SENT":     "wire byte counts",
	"DOWNSTREAM_DECOMPRESSED_HEADER_BYTES_RECEIVED": "wire byte counts",
	"BYTES_RETRANSMITTED":                           "TCP retransmission counts",
	"PACKETS_RETRANSMITTED":                         "TCP retransmission counts",
	"UPSTREAM_PROTOCOL":                             "the upstream protocol",
	"UPSTREAM_REQUEST_ATTEMPT_COUNT":                "attempt counts",
	"UPSTREAM_CONNECTION_ID":                        "connection ids",
	"CONNECTION_ID":                                 "connection ids",
	"STREAM_ID":                                     "stream ids",
	"UPSTREAM_HOST_NAME":                            "endpoint host names",
	"UPSTREAM_HOST_NAME_WITHOUT_PORT":               "endpoint host names",
	"VIRTUAL_CLUSTER_NAME":                          "virtual clusters",
	"FILTER_CHAIN_NAME":                             "filter chain names",
	"CUSTOM_FLAGS":                                  "custom response flags",
	"LOCAL_REPLY_BODY":                              "local reply bodies",
	"TRAILER":                                       "response trailers",
	"RESPONSE_TRAILER":                              "response trailers",
	"DYNAMIC_METADATA":                              "dynamic metadata",
	"CLUSTER_METADATA":                              "metadata",
	"UPSTREAM_METADATA":                             "metadata",
	"METADATA":                                      "metadata",
	"FILTER_STATE":                                  "filter state",
	"UPSTREAM_FILTER_STATE":                         "filter state",
	"CEL":                                           "CEL expressions",
	"REQ_WITHOUT_QUERY":                             "formatter extensions",
	"GRPC_STATUS":                                   "gRPC status",
	"GRPC_STATUS_NUMBER":                            "gRPC status",
	"TRACE_ID":                                      "tracing",
	"DOWNSTREAM_TRANSPORT_FAILURE_REASON":           "downstream TLS failures",
	"DOWNSTREAM_TLS_SESSION_ID":                     "TLS session ids",
	"DOWNSTREAM_LOCAL_URI_SAN":                      "the local certificate",
	"DOWNSTREAM_LOCAL_DNS_SAN":                      "the local certificate",
	"DOWNSTREAM_LOCAL_IP_SAN":                       "the local certificate",
	"DOWNSTREAM_LOCAL_EMAIL_SAN":                    "the local certificate",
	"DOWNSTREAM_LOCAL_OTHERNAME_SAN":                "the local certificate",
	"DOWNSTREAM_LOCAL_SUBJECT":                      "the local certificate",
	"DOWNSTREAM_PEER_OTHERNAME_SAN":                 "othername SANs",
	"DOWNSTREAM_PEER_CHAIN_FINGERPRINTS_256":        "the peer's certificate chain",
	"DOWNSTREAM_PEER_CHAIN_FINGERPRINTS_1":          "the peer's certificate chain",
	"DOWNSTREAM_PEER_CHAIN_SERIALS":                 "the peer's certificate chain",
	"TLS_JA3_FINGERPRINT":                           "TLS fingerprints",
	"TLS_JA4_FINGERPRINT":                           "TLS fingerprints",
	"UPSTREAM_TLS_VERSION":                          "upstream TLS state",
	"UPSTREAM_TLS_CIPHER":                           "upstream TLS state",
	"UPSTREAM_TLS_SESSION_ID":                       "upstream TLS state",
	"UPSTREAM_PEER_SUBJECT":                         "upstream TLS state",
	"UPSTREAM_PEER_ISSUER":                          "upstream TLS state",
	"UPSTREAM_PEER_CERT":                            "upstream TLS state",
	"UPSTREAM_PEER_CERT_V_START":                    "upstream TLS state",
	"UPSTREAM_PEER_CERT_V_END":                      "upstream TLS state",
	"UPSTREAM_PEER_URI_SAN":                         "upstream TLS state",
	"UPSTREAM_PEER_DNS_SAN":                         "upstream TLS state",
	"UPSTREAM_PEER_IP_SAN":                          "upstream TLS state",
	"UPSTREAM_LOCAL_URI_SAN":                        "upstream TLS state",
	"UPSTREAM_LOCAL_DNS_SAN":                        "upstream TLS state",
	"UPSTREAM_LOCAL_IP_SAN":                         "upstream TLS state",
}

// numeric operators are JSON numbers when they are a value's only
// content (Envoy's typed values).
func (s *segment) numeric() bool {
	switch s.op {
	case opResponseCode, opBytesReceived, opBytesSent, opDuration:
		return true
	case opUpstreamLocalAddress, opUpstreamRemoteAddress, opDownstreamLocalAddress, opDownstreamRemoteAddress,
		opDownstreamDirectLocalAddress, opDownstreamDirectRemoteAddress:
		return s.part == justPort
	}
	return false
}

// responseFlagsLong are Envoy's long names of the response flags
// (source/common/stream_info/utility.h, CORE_RESPONSE_FLAGS).
var responseFlagsLong = map[string]string{
	"LH": "FailedLocalHealthCheck", "UH": "NoHealthyUpstream", "UT": "UpstreamRequestTimeout",
	"LR": "LocalReset", "UR": "UpstreamRemoteReset", "UF": "UpstreamConnectionFailure",
	"UC": "UpstreamConnectionTermination", "UO": "UpstreamOverflow", "NR": "NoRouteFound",
	"DI": "DelayInjected", "FI": "FaultInjected", "RL": "RateLimited",
	"UAEX": "UnauthorizedExternalService", "RLSE": "RateLimitServiceError",
	"DC": "DownstreamConnectionTermination", "URX": "UpstreamRetryLimitExceeded",
	"SI": "StreamIdleTimeout", "IH": "InvalidEnvoyRequestHeaders", "DPE": "DownstreamProtocolError",
	"UMSDR": "UpstreamMaxStreamDurationReached", "RFCF": "ResponseFromCacheFilter",
	"NFCF": "NoFilterConfigFound", "DT": "DurationTimeout", "UPE": "UpstreamProtocolError",
	"NC": "NoClusterFound", "OM": "OverloadManagerTerminated", "DF": "DnsResolutionFailed",
	"DO": "DropOverload", "DR": "DownstreamRemoteReset",
}

// value appends the operator's value for r to dst[:0] and returns it,
// or false when Envoy has no value (it prints "-", JSON null).
func (s *segment) value(dst []byte, r *Record) ([]byte, bool) {
	str := func(v string) ([]byte, bool) {
		if v == "" {
			return nil, false
		}
		return append(dst, v...), true
	}
	switch s.op {
	case opConst:
		return append(dst, s.literal...), s.hasConst
	case opStartTime:
		return s.time.append(dst, r.Start), true
	case opEmitTime:
		return s.time.append(dst, time.Now()), true
	case opReq, opResp:
		h := r.Request
		if s.op == opResp {
			h = r.Response
		}
		v, ok := r.header(h, s.main, s.op == opReq)
		if !ok && s.alt != "" {
			v, ok = r.header(h, s.alt, s.op == opReq)
		}
		if !ok {
			return nil, false
		}
		if s.hasLength && len(v) > s.maxBytes {
			v = v[:s.maxBytes]
		}
		return append(dst, v...), true
	case opProtocol:
		return str(r.Protocol)
	case opResponseCode:
		return strconv.AppendInt(dst, int64(r.Code), 10), true
	case opResponseFlags:
		// "-" is the value itself when there are none (a string in JSON,
		// as Envoy's ResponseFlagUtils prints it).
		if r.Flags == "" {
			return append(dst, '-'), true
		}
		return append(dst, r.Flags...), true
	case opResponseFlagsLong:
		if r.Flags == "" {
			return append(dst, '-'), true
		}
		for i, f := range strings.Split(r.Flags, ",") {
			if i > 0 {
				dst = append(dst, ',')
			}
			if long, ok := responseFlagsLong[f]; ok {
				f = long
			}
			dst = append(dst, f...)
		}
		return dst, true
	case opResponseCodeDetails:
		if r.Details == "" {
			return nil, false
		}
		if s.allowSpaces {
			return append(dst, r.Details...), true
		}
		return appendReplacingSpace(dst, r.Details, " \t\f\v\n\r"), true
	case opConnectionTerminationDetails:
		return str(r.TerminationDetails)
	case opUpstreamTransportFailureReason:
		if r.TransportFailure == "" {
			return nil, false
		}
		return appendReplacingSpace(dst, r.TransportFailure, " "), true
	case opBytesReceived:
		return strconv.AppendInt(dst, r.BytesReceived, 10), true
	case opBytesSent:
		return strconv.AppendInt(dst, r.BytesSent, 10), true
	case opDuration:
		return strconv.AppendInt(dst, r.Duration.Milliseconds(), 10), true
	case opUpstreamHost:
		return str(r.UpstreamHost)
	case opUpstreamCluster:
		if r.UpstreamStatName != "" {
			return append(dst, r.UpstreamStatName...), true
		}
		return str(r.UpstreamCluster)
	case opUpstreamClusterRaw:
		return str(r.UpstreamCluster)
	case opUpstreamLocalAddress:
		return s.part.append(dst, r.UpstreamLocal)
	case opUpstreamRemoteAddress:
		return s.part.append(dst, r.UpstreamRemote)
	case opDownstreamLocalAddress:
		return s.part.append(dst, r.DownstreamLocal)
	case opDownstreamRemoteAddress:
		return s.part.append(dst, r.DownstreamRemote)
	case opDownstreamDirectLocalAddress:
		if r.Conn == nil {
			return nil, false
		}
		return s.part.append(dst, r.Conn.DirectLocal)
	case opDownstreamDirectRemoteAddress:
		if r.Conn == nil {
			return nil, false
		}
		return s.part.append(dst, r.Conn.DirectRemote)
	case opRequestedServerName:
		if r.Conn == nil {
			return nil, false
		}
		return str(r.Conn.SNI)
	case opRouteName:
		return str(r.RouteName)
	case opUniqueID:
		return appendUUID(dst), true
	}
	return s.tlsValue(dst, r)
}

// append prints the part of a that p names; false when a is not set.
func (p addrPart) append(dst []byte, a netip.AddrPort) ([]byte, bool) {
	if !a.IsValid() {
		return nil, false
	}
	switch p {
	case withoutPort:
		return a.Addr().AppendTo(dst), true
	case justPort:
		return strconv.AppendUint(dst, uint64(a.Port()), 10), true
	}
	return a.AppendTo(dst), true
}

// tlsValue is the value of a DOWNSTREAM_TLS_* or DOWNSTREAM_PEER_*
// operator: none without a terminated TLS connection (or, for the peer's,
// without a peer certificate), and none for an empty value, as in Envoy's
// StreamInfoSslConnectionInfoFormatterProvider.
func (s *segment) tlsValue(dst []byte, r *Record) ([]byte, bool) {
	if r.Conn == nil || r.Conn.TLS == nil {
		return nil, false
	}
	st := r.Conn.TLS
	var v string
	switch s.op {
	case opTLSVersion:
		v = tlsVersionName(st.Version)
	case opTLSCipher:
		v = cipherName(st.CipherSuite)
	default:
		if len(st.PeerCertificates) == 0 {
			return nil, false
		}
		return s.peerValue(dst, st.PeerCertificates[0])
	}
	if v == "" {
		return nil, false
	}
	return append(dst, v...), true
}

func (s *segment) peerValue(dst []byte, c *x509.Certificate) ([]byte, bool) {
	var v string
	switch s.op {
	case opPeerURISAN:
		uris := make([]string, len(c.URIs))
		for i, u := range c.URIs {
			uris[i] = u.String()
		}
		v = strings.Join(uris, ",")
	case opPeerDNSSAN:
		v = strings.Join(c.DNSNames, ",")
	case opPeerIPSAN:
		ips := make([]string, len(c.IPAddresses))
		for i, ip := range c.IPAddresses {
			ips[i] = ip.String()
		}
		v = strings.Join(ips, ",")
	case opPeerEmailSAN:
		v = strings.Join(c.EmailAddresses, ",")
	case opPeerSubject:
		v = c.Subject.String()
	case opPeerIssuer:
		v = c.Issuer.String()
	case opPeerSerial:
		// BoringSSL's BN_bn2hex: lower-case hex, no leading zero bytes.
		if c.SerialNumber == nil {
			return nil, false
		}
		if b := c.SerialNumber.Bytes(); len(b) > 0 {
			return hex.AppendEncode(dst, b), true
		}
		return append(dst, '0'), true
	case opPeerFingerprint256:
		sum := sha256.Sum256(c.Raw)
		return hex.AppendEncode(dst, sum[:]), true
	case opPeerFingerprint1:
		sum := sha1.Sum(c.Raw)
		return hex.AppendEncode(dst, sum[:]), true
	case opPeerCert:
		// The PEM, URL-encoded as Envoy's ConnectionInfo does it.
		p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		return append(dst, pemEscaper.Replace(string(p))...), true
	case opPeerCertVStart:
		return s.time.append(dst, c.NotBefore), true
	case opPeerCertVEnd:
		return s.time.append(dst, c.NotAfter), true
	}
	if v == "" {
		return nil, false
	}
	return append(dst, v...), true
}

var pemEscaper = strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D")

// tlsVersionName is the version as BoringSSL's SSL_get_version names it.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "TLSv1"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS13:
		return "TLSv1.3"
	}
	return ""
}

// opensslCipherNames are the OpenSSL names (which Envoy logs) of the
// suites Go negotiates whose OpenSSL name differs from the IANA one.
var opensslCipherNames = map[uint16]string{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:       "ECDHE-ECDSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:         "ECDHE-RSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:       "ECDHE-ECDSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:         "ECDHE-RSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:   "ECDHE-RSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:          "ECDHE-ECDSA-AES128-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA:            "ECDHE-RSA-AES128-SHA",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:          "ECDHE-ECDSA-AES256-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA:            "ECDHE-RSA-AES256-SHA",
	tls.TLS_RSA_WITH_AES_128_GCM_SHA256:               "AES128-GCM-SHA256",
	tls.TLS_RSA_WITH_AES_256_GCM_SHA384:               "AES256-GCM-SHA384",
	tls.TLS_RSA_WITH_AES_128_CBC_SHA:                  "AES128-SHA",
	tls.TLS_RSA_WITH_AES_256_CBC_SHA:                  "AES256-SHA",
}

// cipherName is the suite's OpenSSL name; TLS 1.3 suites have the same
// name in both.
func cipherName(id uint16) string {
	if n, ok := opensslCipherNames[id]; ok {
		return n
	}
	return tls.CipherSuiteName(id)
}

func appendReplacingSpace(dst []byte, s, spaces string) []byte {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(spaces, s[i]) >= 0 {
			dst = append(dst, '_')
		} else {
			dst = append(dst, s[i])
		}
	}
	return dst
}

// appendUUID appends a random (version 4) UUID, as Envoy's
// Random::RandomUtility::uuid.
func appendUUID(dst []byte) []byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	dst = hex.AppendEncode(dst, u[:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, u[10:])
}

// constValue computes HOSTNAME and ENVIRONMENT(X) when the format is
// compiled, as Envoy does.
func constValue(name, arg string, s *segment) error {
	switch name {
	case "HOSTNAME":
		h, err := os.Hostname()
		if err == nil && h != "" {
			s.literal, s.hasConst = h, true
		}
	case "ENVIRONMENT":
		// An unset variable is the string "-" itself (Envoy's
		// EnvironmentFormatter), also in JSON.
		v, ok := os.LookupEnv(arg)
		if !ok {
			v = "-"
		} else if s.hasLength && len(v) > s.maxBytes {
			v = v[:s.maxBytes]
		}
		s.literal, s.hasConst = v, true
	default:
		return fmt.Errorf("command operator %%%s%% has no constant value", name)
	}
	return nil
}
