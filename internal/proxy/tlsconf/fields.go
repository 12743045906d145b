// Package tlsconf is strait-proxy's TLS transport socket
// (envoy.transport_sockets.tls): it turns an UpstreamTlsContext or a
// DownstreamTlsContext into crypto/tls handshakes whose certificates and
// trust bundles come inline, from files, or over SDS (Provider), and are
// read per handshake so that a rotated secret applies to new handshakes
// while established connections keep theirs.
package tlsconf

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the TLS socket's field audit: every field of the TLS
// contexts and the validation context is honoured (read by the builder
// named) or refused by name with the fix, so that a control plane asking
// for something this socket does not implement gets a NACK that names it
// instead of a silently weaker connection. The messages that only carry
// SDS and data sources have allow-lists (a field outside one is refused).
// TestTLSFieldsClassified fails on a field in neither list.

// upstreamHonoured maps each honoured UpstreamTlsContext field to the code
// that reads it.
var upstreamHonoured = map[protoreflect.Name]string{
	"common_tls_context": "buildCommon",
	"sni":                "NewClient: Client.sni",
	"max_session_keys":   "NewClient: Client.sessions, an LRU of that many sessions (unset: 1, 0: no resumption; resume.go)",
}

// upstreamRefused maps each refused UpstreamTlsContext field to why, and
// the fix.
var upstreamRefused = map[protoreflect.Name]string{
	"auto_host_sni":           "the SNI is sni as given; set sni",
	"auto_sni_san_validation": "the peer's SANs are matched by match_subject_alt_names; list them there",
	"allow_renegotiation":     "TLS renegotiation is never allowed; remove it",
	"enforce_rsa_key_usage":   "not implemented; remove it",
}

// downstreamHonoured maps each honoured DownstreamTlsContext field to the
// code that reads it.
var downstreamHonoured = map[protoreflect.Name]string{
	"common_tls_context":                   "buildCommon",
	"require_client_certificate":           "NewServer: Server.requireClient",
	"require_sni":                          "NewServer: Server.requireSNI",
	"disable_stateless_session_resumption": "NewServer: Server.noTickets (else TLS 1.3 tickets, resume.go)",
	"disable_stateful_session_resumption":  "crypto/tls keeps no session cache: stateful resumption is always off",
}

// downstreamRefused maps each refused DownstreamTlsContext field to why,
// and the fix.
var downstreamRefused = map[protoreflect.Name]string{
	"session_ticket_keys":                   "session tickets are sealed with the socket's own keys, rotated daily (resume.go); remove it",
	"session_ticket_keys_sds_secret_config": "session tickets are sealed with the socket's own keys, rotated daily (resume.go); remove it",
	"session_timeout":                       "a session ticket opens for at most two days (resume.go's key rotation); remove it",
	"ocsp_staple_policy":                    "no OCSP response is stapled; remove it",
	"full_scan_certs_on_sni_mismatch":       "a context serves one certificate; remove it",
	"prefer_client_ciphers":                 "the cipher suite is chosen by crypto/tls; remove it",
}

// commonHonoured maps each honoured CommonTlsContext field to the code
// that reads it.
var commonHonoured = map[protoreflect.Name]string{
	"tls_params":                           "common.params",
	"tls_certificates":                     "buildCommon: one inline or file certificate",
	"tls_certificate_sds_secret_configs":   "buildCommon: one SDS certificate (secrets.go)",
	"validation_context":                   "buildCommon, with validationHonoured",
	"validation_context_sds_secret_config": "buildCommon: an SDS trust bundle (secrets.go)",
	"combined_validation_context":          "buildCommon, with combinedValidationFields",
	"alpn_protocols":                       "buildCommon: common.alpn",
}

// commonRefused maps each refused CommonTlsContext field to why, and the
// fix.
var commonRefused = map[protoreflect.Name]string{
	"tls_certificate_provider_instance":                "certificates come inline, from files or over SDS; use tls_certificate_sds_secret_configs",
	"custom_tls_certificate_selector":                  "a context serves one certificate; remove it",
	"tls_certificate_certificate_provider":             "certificates come inline, from files or over SDS; use tls_certificate_sds_secret_configs",
	"tls_certificate_certificate_provider_instance":    "certificates come inline, from files or over SDS; use tls_certificate_sds_secret_configs",
	"validation_context_certificate_provider":          "trust bundles come inline, from files or over SDS; use validation_context_sds_secret_config",
	"validation_context_certificate_provider_instance": "trust bundles come inline, from files or over SDS; use validation_context_sds_secret_config",
	"custom_handshaker":                                "the handshake is crypto/tls's; remove it",
	"key_log":                                          "no TLS key log is written; remove it",
}

// validationHonoured maps each honoured CertificateValidationContext field
// of a static validation context (in the TLS context) to the code that
// reads it.
var validationHonoured = map[protoreflect.Name]string{
	"trusted_ca":                    "trustedCA",
	"match_subject_alt_names":       "sanMatchers (context.go)",
	"match_typed_subject_alt_names": "sanMatchers (context.go), with sanMatcherFields",
	"crl":                           "parseCRLs (crl.go): checked along the whole chain",
}

// validationRefused maps each refused CertificateValidationContext field
// to why, and the fix.
var validationRefused = map[protoreflect.Name]string{
	"ca_certificate_provider_instance":     "trust bundles come inline, from files or over SDS; use trusted_ca",
	"system_root_certs":                    "the trust bundle is the one given; name it in trusted_ca",
	"watched_directory":                    "files are read when the context is built; remove it",
	"verify_certificate_spki":              "certificates are not pinned; match them with match_subject_alt_names",
	"verify_certificate_hash":              "certificates are not pinned; match them with match_subject_alt_names",
	"require_signed_certificate_timestamp": "no SCT is checked; remove it",
	"allow_expired_certificate":            "an expired certificate is always refused; remove it",
	"trust_chain_verification":             "the chain is always verified (VERIFY_TRUST_CHAIN); remove it",
	"custom_validator_config":              "the chain is verified by crypto/x509; remove it",
	"only_verify_leaf_cert_crl":            "CRLs are checked along the whole chain; remove it",
	"max_verify_depth":                     "the chain is verified to any depth; remove it",
	"suppress_client_ca_list":              "not implemented; remove it",
}

// Allow-lists of the messages that carry SDS configs, data sources and
// matchers: every field outside one is refused by name.
var (
	combinedValidationFields = map[protoreflect.Name]bool{"default_validation_context": true, "validation_context_sds_secret_config": true}
	tlsParametersFields      = map[protoreflect.Name]bool{
		"tls_minimum_protocol_version": true, "tls_maximum_protocol_version": true, "cipher_suites": true, "ecdh_curves": true,
	}
	sanMatcherFields    = map[protoreflect.Name]bool{"san_type": true, "matcher": true}
	stringMatcherFields = map[protoreflect.Name]bool{
		"exact": true, "prefix": true, "suffix": true, "contains": true, "safe_regex": true, "ignore_case": true,
	}
	sdsSecretConfigFields = map[protoreflect.Name]bool{"name": true, "sds_config": true}
	sdsConfigSourceFields = map[protoreflect.Name]bool{"api_config_source": true, "resource_api_version": true, "initial_fetch_timeout": true}
	adsConfigSourceFields = map[protoreflect.Name]bool{"ads": true, "resource_api_version": true, "initial_fetch_timeout": true}
	apiConfigSourceFields = map[protoreflect.Name]bool{
		"api_type": true, "transport_api_version": true, "grpc_services": true, "set_node_on_first_message_only": true,
	}
	grpcServiceFields    = map[protoreflect.Name]bool{"envoy_grpc": true, "timeout": true}
	envoyGrpcFields      = map[protoreflect.Name]bool{"cluster_name": true}
	tlsCertificateFields = map[protoreflect.Name]bool{"certificate_chain": true, "private_key": true}
)
