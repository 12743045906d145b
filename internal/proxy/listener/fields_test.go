package listener

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestListenerFieldsClassified: every field of the Listener and the
// messages it carries is honoured or refused, so that a new Envoy API's
// field is noticed here.
func TestListenerFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&listenerv3.Listener{}).ProtoReflect().Descriptor(), listenerHonoured, listenerRefused)
	fieldtest.Classified(t, (&listenerv3.FilterChain{}).ProtoReflect().Descriptor(), filterChainHonoured, filterChainRefused)
	fieldtest.Classified(t, (&listenerv3.FilterChainMatch{}).ProtoReflect().Descriptor(), filterChainMatchHonoured, filterChainMatchRefused)
	fieldtest.Classified(t, (&listenerv3.Filter{}).ProtoReflect().Descriptor(), networkFilterHonoured, networkFilterRefused)
	fieldtest.Classified(t, (&listenerv3.ListenerFilter{}).ProtoReflect().Descriptor(), listenerFilterHonoured, listenerFilterRefused)
	fieldtest.Classified(t, (&tlsinspectorv3.TlsInspector{}).ProtoReflect().Descriptor(), tlsInspectorHonoured, tlsInspectorRefused)
	fieldtest.Classified(t, (&originalsrcv3.OriginalSrc{}).ProtoReflect().Descriptor(), originalSrcHonoured, originalSrcRefused)
}

// TestListenerRefusedFields: each refused field, set, is an error naming
// it (with its path below the listener); the listener without it builds.
func TestListenerRefusedFields(t *testing.T) {
	if _, err := Build(chained(t, "127.0.0.1:80", "a"), Deps{Stats: stats.New()}); err != nil {
		t.Fatal(err)
	}
	type refusal struct {
		want string
		set  func(l *listenerv3.Listener)
	}
	var cases []refusal
	// set returns a case setting field n of the message at (the Listener,
	// or one it carries) to something.
	set := func(want string, n protoreflect.Name, at func(l *listenerv3.Listener) proto.Message) refusal {
		return refusal{want, func(l *listenerv3.Listener) {
			m := at(l).ProtoReflect()
			fieldtest.SetSomething(m, m.Descriptor().Fields().ByName(n))
		}}
	}
	for n := range listenerRefused {
		cases = append(cases, set(string(n), n, func(l *listenerv3.Listener) proto.Message { return l }))
	}
	for n := range filterChainRefused {
		cases = append(cases, set("filter_chains[0]."+string(n), n, func(l *listenerv3.Listener) proto.Message { return l.FilterChains[0] }))
	}
	for n := range filterChainMatchRefused {
		cases = append(cases, set("filter_chains[0].filter_chain_match."+string(n), n, func(l *listenerv3.Listener) proto.Message {
			return l.FilterChains[0].FilterChainMatch
		}))
	}
	for n := range networkFilterRefused {
		cases = append(cases, set("filter_chains[0].filters[0]."+string(n), n, func(l *listenerv3.Listener) proto.Message {
			return l.FilterChains[0].Filters[0]
		}))
	}
	for n := range listenerFilterRefused {
		cases = append(cases, set("listener_filters[0]."+string(n), n, func(l *listenerv3.Listener) proto.Message {
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: originalDstFilter}}
			return l.ListenerFilters[0]
		}))
	}
	for n := range tlsInspectorRefused {
		cases = append(cases, refusal{"tls_inspector." + string(n), func(l *listenerv3.Listener) {
			var cfg tlsinspectorv3.TlsInspector
			fieldtest.SetSomething(cfg.ProtoReflect(), cfg.ProtoReflect().Descriptor().Fields().ByName(n))
			l.ListenerFilters = []*listenerv3.ListenerFilter{listenerFilter(t, tlsInspectorFilter, &cfg)}
		}})
	}
	cases = append(cases, refusal{"max_client_hello_size 1024", func(l *listenerv3.Listener) {
		cfg := &tlsinspectorv3.TlsInspector{MaxClientHelloSize: wrapperspb.UInt32(1024)}
		l.ListenerFilters = []*listenerv3.ListenerFilter{listenerFilter(t, tlsInspectorFilter, cfg)}
	}})
	for n := range originalSrcRefused {
		cases = append(cases, refusal{"original_src." + string(n), func(l *listenerv3.Listener) {
			var cfg originalsrcv3.OriginalSrc
			fieldtest.SetSomething(cfg.ProtoReflect(), cfg.ProtoReflect().Descriptor().Fields().ByName(n))
			l.ListenerFilters = []*listenerv3.ListenerFilter{listenerFilter(t, originalSrcFilter, &cfg)}
		}})
	}
	cases = append(cases,
		refusal{"default_filter_chain.use_proxy_proto", func(l *listenerv3.Listener) {
			l.DefaultFilterChain = proto.Clone(l.FilterChains[0]).(*listenerv3.FilterChain)
			l.DefaultFilterChain.FilterChainMatch = nil
			fieldtest.SetSomething(l.DefaultFilterChain.ProtoReflect(), l.DefaultFilterChain.ProtoReflect().Descriptor().Fields().ByName("use_proxy_proto"))
		}},
		refusal{"tls_inspector has fields strait-proxy does not know", func(l *listenerv3.Listener) {
			var cfg tlsinspectorv3.TlsInspector
			cfg.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
			l.ListenerFilters = []*listenerv3.ListenerFilter{listenerFilter(t, tlsInspectorFilter, &cfg)}
		}},
	)
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			l := chained(t, "127.0.0.1:80", "a")
			tc.set(l)
			if _, err := Build(l, Deps{Stats: stats.New()}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestListenerHonouredValuesAccepted: the honoured fields whose values
// are checked build at the values strait implements.
func TestListenerHonouredValuesAccepted(t *testing.T) {
	l := chained(t, "127.0.0.1:80", "a")
	l.ListenerFilters = []*listenerv3.ListenerFilter{
		listenerFilter(t, tlsInspectorFilter, &tlsinspectorv3.TlsInspector{MaxClientHelloSize: wrapperspb.UInt32(maxClientHello),
			EnableJa3Fingerprinting: wrapperspb.Bool(false), EnableJa4Fingerprinting: wrapperspb.Bool(false), InitialReadBufferSize: wrapperspb.UInt32(1024)}),
		listenerFilter(t, originalSrcFilter, &originalsrcv3.OriginalSrc{Mark: 7}),
	}
	l.FilterChains[0].Metadata, l.FilterChains[0].Name = &corev3.Metadata{}, "c"
	if _, err := Build(l, Deps{Stats: stats.New()}); err != nil {
		t.Fatal(err)
	}
}

// TestListenerUnknownFieldsRefused: a newer API's field, kept as unknown
// bytes, is refused at each level the audit covers.
func TestListenerUnknownFieldsRefused(t *testing.T) {
	unknown := func(m proto.Message) {
		m.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	}
	for _, tc := range []struct {
		want string
		set  func(l *listenerv3.Listener)
	}{
		{"the Listener has fields", func(l *listenerv3.Listener) { unknown(l) }},
		{"filter_chains[0] has fields", func(l *listenerv3.Listener) { unknown(l.FilterChains[0]) }},
		{"filter_chains[0].filter_chain_match has fields", func(l *listenerv3.Listener) { unknown(l.FilterChains[0].FilterChainMatch) }},
		{"filter_chains[0].filters[0] has fields", func(l *listenerv3.Listener) { unknown(l.FilterChains[0].Filters[0]) }},
	} {
		l := chained(t, "127.0.0.1:80", "a")
		tc.set(l)
		if _, err := Build(l, Deps{Stats: stats.New()}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want the unknown field refused", tc.want, err)
		}
	}
}

func listenerFilter(t *testing.T, name string, cfg proto.Message) *listenerv3.ListenerFilter {
	t.Helper()
	a, err := anypb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.ListenerFilter{Name: name, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}}
}
