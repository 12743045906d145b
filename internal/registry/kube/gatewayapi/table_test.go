package gatewayapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

// objects decodes a multi-document YAML of Gateway API objects (by kind)
// into an Input with the test lookups: every Service exists but
// "missing", the namespace "apps" is labelled team=a and "infra" has no
// labels (others do not exist), the Secret "bad" is no certificate.
func objects(t *testing.T, docs string) Input {
	t.Helper()
	in := Input{
		Domain:         "cluster.local",
		GatewayClasses: []*gwv1.GatewayClass{decode[gwv1.GatewayClass](t, classYAML)},
		ServiceExists:  func(_, name string) bool { return name != "missing" },
		NamespaceLabels: func(ns string) map[string]string {
			switch ns {
			case "apps":
				return map[string]string{"team": "a"}
			case "infra":
				return map[string]string{}
			}
			return nil
		},
		Certificate: func(ns, name string) error {
			if name == "bad" {
				return errors.New("no certificate in " + ns + "/" + name)
			}
			return nil
		},
	}
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "GatewayClass":
			// Before the default class: a class of another controller first.
			in.GatewayClasses = append([]*gwv1.GatewayClass{decode[gwv1.GatewayClass](t, doc)}, in.GatewayClasses...)
		case "Gateway":
			in.Gateways = append(in.Gateways, decode[gwv1.Gateway](t, doc))
		case "HTTPRoute":
			in.HTTPRoutes = append(in.HTTPRoutes, decode[gwv1.HTTPRoute](t, doc))
		case "GRPCRoute":
			in.GRPCRoutes = append(in.GRPCRoutes, decode[gwv1.GRPCRoute](t, doc))
		case "TLSRoute":
			in.TLSRoutes = append(in.TLSRoutes, decode[gwv1.TLSRoute](t, doc))
		case "TCPRoute":
			in.TCPRoutes = append(in.TCPRoutes, decode[gwv1.TCPRoute](t, doc))
		case "ReferenceGrant":
			in.ReferenceGrants = append(in.ReferenceGrants, decode[gwv1beta1.ReferenceGrant](t, doc))
		default:
			t.Fatalf("kind %q:\n%s", meta.Kind, doc)
		}
	}
	return in
}

// render is the whole of a translation as lines: each config with its
// spec, each condition of each status (with the listeners' attached
// routes and kinds), the deployments' ports, the Secrets and the dropped
// VirtualServices, sorted.
func render(t *testing.T, out Output) []string {
	t.Helper()
	var lines []string
	for _, c := range out.Configs {
		// protojson's spacing varies from run to run: compact it.
		b, err := protojson.Marshal(c.Spec)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %s/%s %v %s", c.Kind, c.Namespace, c.Name, c.Annotations, b))
	}
	conds := func(prefix string, cs []metav1.Condition) {
		for _, c := range cs {
			lines = append(lines, fmt.Sprintf("%s %s=%s %s: %s (gen %d)", prefix, c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration))
		}
	}
	for r, s := range out.GatewayClasses {
		conds(r.String(), s.Conditions)
	}
	for r, s := range out.Gateways {
		conds(r.String(), s.Conditions)
		for _, l := range s.Listeners {
			var kinds []string
			for _, k := range l.SupportedKinds {
				kinds = append(kinds, string(k.Kind))
			}
			p := fmt.Sprintf("%s listener %s attached=%d kinds=%v", r, l.Name, l.AttachedRoutes, kinds)
			conds(p, l.Conditions)
		}
	}
	for r, s := range out.Routes {
		for i, p := range s.Parents {
			conds(fmt.Sprintf("%s parent[%d] %s/%s/%s/%s", r, i, ptrString(p.ParentRef.Namespace), p.ParentRef.Name, ptrString(p.ParentRef.SectionName), p.ControllerName), p.Conditions)
		}
	}
	for _, d := range out.Deployments {
		lines = append(lines, fmt.Sprintf("deploy %s/%s %+v", d.Gateway.Namespace, d.Gateway.Name, d.Ports))
	}
	for k, v := range out.Secrets {
		lines = append(lines, fmt.Sprintf("secret %s %v", k, v))
	}
	for _, e := range out.Dropped {
		lines = append(lines, "dropped "+e.Error())
	}
	for i, l := range lines {
		// A raw string literal holds the expected lines.
		lines[i] = strings.ReplaceAll(l, "`", "'")
	}
	slices.Sort(lines)
	return lines
}

// checkRender compares render's lines with want (one a line, sorted);
// GOLDEN_PRINT=1 prints them instead, for writing a new case by hand
// after reading them.
func checkRender(t *testing.T, out Output, want string) {
	t.Helper()
	got := render(t, out)
	if os.Getenv("GOLDEN_PRINT") != "" {
		fmt.Printf("=== %s\n%s\n", t.Name(), strings.Join(got, "\n"))
		return
	}
	w := strings.Split(strings.TrimSpace(want), "\n")
	for i := range w {
		w[i] = strings.TrimSpace(w[i])
	}
	if !slices.Equal(got, w) {
		for _, l := range got {
			if !slices.Contains(w, l) {
				t.Errorf("unexpected: %s", l)
			}
		}
		for _, l := range w {
			if !slices.Contains(got, l) {
				t.Errorf("missing:    %s", l)
			}
		}
	}
}
