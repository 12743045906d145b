package tlsconf

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestTLSFieldsClassified: every field of the TLS contexts and the
// validation context is honoured or refused, so that a new Envoy API's
// field is noticed here; the allow-lists name only real fields.
func TestTLSFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&tlsv3.UpstreamTlsContext{}).ProtoReflect().Descriptor(), upstreamHonoured, upstreamRefused)
	fieldtest.Classified(t, (&tlsv3.DownstreamTlsContext{}).ProtoReflect().Descriptor(), downstreamHonoured, downstreamRefused)
	fieldtest.Classified(t, (&tlsv3.CommonTlsContext{}).ProtoReflect().Descriptor(), commonHonoured, commonRefused)
	fieldtest.Classified(t, (&tlsv3.CertificateValidationContext{}).ProtoReflect().Descriptor(), validationHonoured, validationRefused)
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&tlsv3.CommonTlsContext_CombinedCertificateValidationContext{}, combinedValidationFields},
		{&tlsv3.TlsParameters{}, tlsParametersFields},
		{&tlsv3.SubjectAltNameMatcher{}, sanMatcherFields},
		{&matcherv3.StringMatcher{}, stringMatcherFields},
		{&tlsv3.SdsSecretConfig{}, sdsSecretConfigFields},
		{&corev3.ConfigSource{}, sdsConfigSourceFields},
		{&corev3.ApiConfigSource{}, apiConfigSourceFields},
		{&corev3.GrpcService{}, grpcServiceFields},
		{&corev3.GrpcService_EnvoyGrpc{}, envoyGrpcFields},
		{&tlsv3.TlsCertificate{}, tlsCertificateFields},
	} {
		fieldtest.Known(t, c.m.ProtoReflect().Descriptor(), c.list)
	}
}

// TestTLSRefusedFields: each refused field, set, is an error naming it by
// its path in the context.
func TestTLSRefusedFields(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	static := func() *tlsv3.CommonTlsContext {
		return &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{}}}
	}
	if _, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: static()}), prov); err != nil {
		t.Fatal(err)
	}
	type refusal struct {
		want string
		m    func() (proto.Message, protoreflect.Message) // the context to build, and the message to set a field of
	}
	var cases []refusal
	for n := range upstreamRefused {
		cases = append(cases, refusal{"UpstreamTlsContext." + string(n), func() (proto.Message, protoreflect.Message) {
			u := &tlsv3.UpstreamTlsContext{}
			return u, u.ProtoReflect()
		}})
	}
	for n := range downstreamRefused {
		cases = append(cases, refusal{"DownstreamTlsContext." + string(n), func() (proto.Message, protoreflect.Message) {
			d := &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon(nil)}
			return d, d.ProtoReflect()
		}})
	}
	for n := range commonRefused {
		cases = append(cases, refusal{"UpstreamTlsContext.common_tls_context." + string(n), func() (proto.Message, protoreflect.Message) {
			u := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}
			return u, u.CommonTlsContext.ProtoReflect()
		}})
	}
	for n := range validationRefused {
		cases = append(cases, refusal{"common_tls_context.validation_context." + string(n), func() (proto.Message, protoreflect.Message) {
			u := &tlsv3.UpstreamTlsContext{CommonTlsContext: static()}
			return u, u.CommonTlsContext.GetValidationContext().ProtoReflect()
		}})
	}
	for _, tc := range cases {
		name := tc.want[strings.LastIndexByte(tc.want, '.')+1:]
		t.Run(tc.want, func(t *testing.T) {
			ctx, m := tc.m()
			fieldtest.SetSomething(m, m.Descriptor().Fields().ByName(protoreflect.Name(name)))
			var err error
			if u, ok := ctx.(*tlsv3.UpstreamTlsContext); ok {
				_, err = NewClient(socket(t, u), prov)
			} else {
				_, err = NewServer(socket(t, ctx), prov)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want+" is not supported") {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestTLSUnknownFieldsRefused: a newer API's field, kept as unknown bytes,
// is refused.
func TestTLSUnknownFieldsRefused(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	u := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}
	u.CommonTlsContext.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	if _, err := NewClient(socket(t, u), prov); err == nil || !strings.Contains(err.Error(), "common_tls_context has fields strait-proxy does not know") {
		t.Errorf("got %v, want the unknown field refused", err)
	}
}
