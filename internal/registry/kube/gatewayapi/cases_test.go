package gatewayapi

import "testing"

const gwHeader = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra, generation: 2}
spec:
  gatewayClassName: istio
  listeners:
`

// translateCases: YAML in, Translate, the whole output checked line by line.
var translateCases = []struct{ name, in, want string }{
	{"listeners", gwHeader + `
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}, {kind: TCPRoute}, {group: example.com, kind: HTTPRoute}]}}
  - {name: tcp80, port: 80, protocol: TCP}
  - {name: dup, port: 80, protocol: HTTP}
  - {name: other.host, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: dup-host, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: udp, port: 53, protocol: UDP}
  - {name: term, port: 8443, protocol: TLS, tls: {mode: Terminate}}
  - {name: pass-certs, port: 8444, protocol: TLS, tls: {mode: Passthrough, certificateRefs: [{name: c}]}}
  - {name: http-tls, port: 8080, protocol: HTTP, tls: {certificateRefs: [{name: c}]}}
  - {name: https-none, port: 443, protocol: HTTPS}
  - {name: https-pass, port: 444, protocol: HTTPS, tls: {mode: Passthrough}}
  - {name: https-opts, port: 445, protocol: HTTPS, tls: {options: {a: b}, certificateRefs: [{name: c}]}}
  - {name: https-nocert, port: 446, protocol: HTTPS, tls: {}}
  - {name: https-two, port: 447, protocol: HTTPS, tls: {certificateRefs: [{name: c}, {name: d}]}}
  - {name: https-kind, port: 448, protocol: HTTPS, tls: {certificateRefs: [{name: c, kind: ConfigMap}]}}
  - {name: https-group, port: 449, protocol: HTTPS, tls: {certificateRefs: [{name: c, group: example.com}]}}
  - {name: https-xns, port: 450, protocol: HTTPS, tls: {certificateRefs: [{name: c, namespace: certs}]}}
  - {name: https-xns-ok, port: 451, protocol: HTTPS, tls: {certificateRefs: [{name: ok, namespace: certs}]}}
  - {name: https-bad, port: 452, protocol: HTTPS, tls: {certificateRefs: [{name: bad}]}}
  - {name: tls-none, port: 8445, protocol: TLS}
  - {name: tls-nomode, port: 8446, protocol: TLS, tls: {}}
  - {name: https-same-ns, port: 453, protocol: HTTPS, tls: {certificateRefs: [{name: c, namespace: infra, group: "", kind: Secret}]}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: elsewhere, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: "", kind: Secret}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: wrong, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}, {group: gateway.networking.k8s.io, kind: Gateway, namespace: apps}]
  to: [{group: "", kind: Secret}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: "", kind: Secret, name: ok}]
`, `
		Gateway infra/gw Accepted=True ListenersNotValid: Some listeners are not valid; the others are served (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener dup attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener dup attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=True HostnameConflict: listener conflicts with an earlier listener on port 80 (gen 2)
		Gateway infra/gw listener dup attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener dup attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener dup-host attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener dup-host attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=True ProtocolConflict: listener conflicts with an earlier listener on port 80 (gen 2)
		Gateway infra/gw listener dup-host attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener dup-host attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute] ResolvedRefs=False InvalidRouteKinds: spec.listeners[0].allowedRoutes.kinds: invalid route kinds gateway.networking.k8s.io/TCPRoute, example.com/HTTPRoute (gen 2)
		Gateway infra/gw listener http-tls attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False UnsupportedValue: spec.listeners[8].tls: only HTTPS and TLS listeners may set tls (gen 2)
		Gateway infra/gw listener http-tls attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http-tls attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener http-tls attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-bad attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-bad attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-bad attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: Bad TLS configuration (gen 2)
		Gateway infra/gw listener https-bad attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=False InvalidCertificateRef: spec.listeners[18].tls.certificateRefs[0]: invalid certificate reference: no certificate in infra/bad (gen 2)
		Gateway infra/gw listener https-group attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-group attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-group attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: Bad TLS configuration (gen 2)
		Gateway infra/gw listener https-group attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=False InvalidCertificateRef: spec.listeners[15].tls.certificateRefs[0]: invalid certificate reference example.com/, only a core Secret is supported (gen 2)
		Gateway infra/gw listener https-kind attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-kind attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-kind attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: Bad TLS configuration (gen 2)
		Gateway infra/gw listener https-kind attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=False InvalidCertificateRef: spec.listeners[14].tls.certificateRefs[0]: invalid certificate reference /ConfigMap, only a core Secret is supported (gen 2)
		Gateway infra/gw listener https-nocert attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-nocert attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-nocert attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: Bad TLS configuration (gen 2)
		Gateway infra/gw listener https-nocert attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=False InvalidCertificateRef: spec.listeners[12].tls.certificateRefs: an HTTPS listener needs a certificate (gen 2)
		Gateway infra/gw listener https-none attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: spec.listeners[9].tls: an HTTPS listener needs tls (gen 2)
		Gateway infra/gw listener https-none attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-none attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener https-none attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-opts attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False UnsupportedValue: spec.listeners[11].tls.options: not supported by Strait yet (gen 2)
		Gateway infra/gw listener https-opts attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-opts attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener https-opts attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-pass attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False UnsupportedValue: spec.listeners[10].tls.mode: Passthrough is not valid on an HTTPS listener (gen 2)
		Gateway infra/gw listener https-pass attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-pass attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener https-pass attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-same-ns attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-same-ns attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-same-ns attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener https-same-ns attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-two attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False UnsupportedValue: spec.listeners[13].tls.certificateRefs: more than one certificate is not supported by Strait yet (gen 2)
		Gateway infra/gw listener https-two attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-two attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener https-two attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener https-xns attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-xns attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-xns attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: Bad TLS configuration (gen 2)
		Gateway infra/gw listener https-xns attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=False RefNotPermitted: spec.listeners[16].tls.certificateRefs[0]: secret certs/c is not accessible to a Gateway in namespace "infra" (missing a ReferenceGrant?) (gen 2)
		Gateway infra/gw listener https-xns-ok attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener https-xns-ok attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener https-xns-ok attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener https-xns-ok attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener other.host attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener other.host attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=True ProtocolConflict: listener conflicts with an earlier listener on port 80 (gen 2)
		Gateway infra/gw listener other.host attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener other.host attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener pass-certs attached=0 kinds=[TLSRoute] Accepted=False UnsupportedValue: spec.listeners[7].tls: a Passthrough listener takes no certificateRefs or options (gen 2)
		Gateway infra/gw listener pass-certs attached=0 kinds=[TLSRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener pass-certs attached=0 kinds=[TLSRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener pass-certs attached=0 kinds=[TLSRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener tcp80 attached=0 kinds=[TCPRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener tcp80 attached=0 kinds=[TCPRoute] Conflicted=True ProtocolConflict: listener conflicts with an earlier listener on port 80 (gen 2)
		Gateway infra/gw listener tcp80 attached=0 kinds=[TCPRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener tcp80 attached=0 kinds=[TCPRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener term attached=0 kinds=[TLSRoute] Accepted=False UnsupportedValue: spec.listeners[6].tls.mode: a TLS listener that terminates TLS is not supported by Strait yet (use Passthrough) (gen 2)
		Gateway infra/gw listener term attached=0 kinds=[TLSRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener term attached=0 kinds=[TLSRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener term attached=0 kinds=[TLSRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener tls-nomode attached=0 kinds=[TLSRoute] Accepted=False UnsupportedValue: spec.listeners[20].tls.mode: a TLS listener that terminates TLS is not supported by Strait yet (use Passthrough) (gen 2)
		Gateway infra/gw listener tls-nomode attached=0 kinds=[TLSRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener tls-nomode attached=0 kinds=[TLSRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener tls-nomode attached=0 kinds=[TLSRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener tls-none attached=0 kinds=[TLSRoute] Accepted=False UnsupportedValue: spec.listeners[19].tls.mode: a TLS listener that terminates TLS is not supported by Strait yet (use Passthrough) (gen 2)
		Gateway infra/gw listener tls-none attached=0 kinds=[TLSRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener tls-none attached=0 kinds=[TLSRoute] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener tls-none attached=0 kinds=[TLSRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener udp attached=0 kinds=[] Accepted=False UnsupportedProtocol: spec.listeners[5].protocol: protocol "UDP" is not supported (gen 2)
		Gateway infra/gw listener udp attached=0 kinds=[] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener udp attached=0 kinds=[] Programmed=False Invalid: the listener is not served (gen 2)
		Gateway infra/gw listener udp attached=0 kinds=[] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-https-same-ns map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"https-same-ns","number":453,"protocol":"HTTPS"},"tls":{"credentialName":"c","mode":"SIMPLE"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-https-xns-ok map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"https-xns-ok","number":451,"protocol":"HTTPS"},"tls":{"credentialName":"kubernetes-gateway://certs/ok","mode":"SIMPLE"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http} {Name:udp Port:53 AppProtocol:udp} {Name:term Port:8443 AppProtocol:tls} {Name:pass-certs Port:8444 AppProtocol:tls} {Name:http-tls Port:8080 AppProtocol:http} {Name:https-none Port:443 AppProtocol:https} {Name:https-pass Port:444 AppProtocol:https} {Name:https-opts Port:445 AppProtocol:https} {Name:https-nocert Port:446 AppProtocol:https} {Name:https-two Port:447 AppProtocol:https} {Name:https-kind Port:448 AppProtocol:https} {Name:https-group Port:449 AppProtocol:https} {Name:https-xns Port:450 AppProtocol:https} {Name:https-xns-ok Port:451 AppProtocol:https} {Name:https-bad Port:452 AppProtocol:https} {Name:tls-none Port:8445 AppProtocol:tls} {Name:tls-nomode Port:8446 AppProtocol:tls} {Name:https-same-ns Port:453 AppProtocol:https}]
		secret certs/c [infra]
		secret certs/ok [infra]
		secret infra/bad [infra]
		secret infra/c [infra]
`},
	{"gateway refused", `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other, generation: 3}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: params, generation: 4}
spec: {controllerName: istio.io/gateway-controller, parametersRef: {group: "", kind: ConfigMap, name: p}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: addr, namespace: infra}
spec:
  gatewayClassName: istio
  addresses: [{value: 192.0.2.1}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: infra, namespace: infra}
spec:
  gatewayClassName: istio
  infrastructure: {labels: {a: b}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tls, namespace: infra}
spec:
  gatewayClassName: istio
  tls: {}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: al, namespace: infra}
spec:
  gatewayClassName: istio
  allowedListeners: {}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: none, namespace: infra}
spec:
  gatewayClassName: istio
  listeners: [{name: udp, port: 53, protocol: UDP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: foreign, namespace: infra}
spec:
  gatewayClassName: other
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: ports, namespace: infra}
spec:
  gatewayClassName: istio
  listeners:
  - {name: status.port, port: 80, protocol: HTTP}
  - {name: status-port, port: 81, protocol: HTTP}
  - {name: a-very-long-listener-name-that-is-more-than-sixty-three-characters-long, port: 82, protocol: HTTP}
  - {name: again, port: 80, protocol: HTTP, hostname: x.example.com}
  - {name: again2, port: 82, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: empty, namespace: infra}
spec:
  gatewayClassName: istio
  listeners: []
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: infra}
spec:
  parentRefs: [{name: ports, group: "", kind: Service}, {name: addr}, {name: none}, {name: foreign}, {name: nosuch}, {name: ports, kind: Other}, {name: ports, group: "", kind: Other}, {name: ports, group: example.com}, {name: ports, sectionName: again}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`, `
		Gateway infra/addr Accepted=False UnsupportedAddress: spec.addresses: not supported by Strait yet (straitd deploys the gateway itself; remove the addresses) (gen 0)
		Gateway infra/addr Programmed=False Invalid: the Gateway is not accepted (gen 0)
		Gateway infra/addr listener http attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: the Gateway is not accepted: spec.addresses: not supported by Strait yet (straitd deploys the gateway itself; remove the addresses) (gen 0)
		Gateway infra/addr listener http attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/addr listener http attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/addr listener http attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/al Accepted=False ListenersNotValid: spec.allowedListeners: not supported by Strait yet (gen 0)
		Gateway infra/al Programmed=False Invalid: the Gateway is not accepted (gen 0)
		Gateway infra/al listener http attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: the Gateway is not accepted: spec.allowedListeners: not supported by Strait yet (gen 0)
		Gateway infra/al listener http attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/al listener http attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/al listener http attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/empty Accepted=True Accepted: Resource accepted (gen 0)
		Gateway infra/empty Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/empty-istio does not exist yet (gen 0)
		Gateway infra/infra Accepted=False InvalidParameters: spec.infrastructure: not supported by Strait yet (gen 0)
		Gateway infra/infra Programmed=False Invalid: the Gateway is not accepted (gen 0)
		Gateway infra/infra listener http attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: the Gateway is not accepted: spec.infrastructure: not supported by Strait yet (gen 0)
		Gateway infra/infra listener http attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/infra listener http attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/infra listener http attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/none Accepted=False ListenersNotValid: no listener is valid (see the listeners' conditions) (gen 0)
		Gateway infra/none Programmed=False Invalid: the Gateway is not accepted (gen 0)
		Gateway infra/none listener udp attached=0 kinds=[] Accepted=False UnsupportedProtocol: spec.listeners[0].protocol: protocol "UDP" is not supported (gen 0)
		Gateway infra/none listener udp attached=0 kinds=[] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/none listener udp attached=0 kinds=[] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/none listener udp attached=0 kinds=[] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports Accepted=True ListenersNotValid: Some listeners are not valid; the others are served (gen 0)
		Gateway infra/ports Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/ports-istio does not exist yet (gen 0)
		Gateway infra/ports listener a-very-long-listener-name-that-is-more-than-sixty-three-characters-long attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 0)
		Gateway infra/ports listener a-very-long-listener-name-that-is-more-than-sixty-three-characters-long attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/ports listener a-very-long-listener-name-that-is-more-than-sixty-three-characters-long attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 0)
		Gateway infra/ports listener a-very-long-listener-name-that-is-more-than-sixty-three-characters-long attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports listener again attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 0)
		Gateway infra/ports listener again attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/ports listener again attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 0)
		Gateway infra/ports listener again attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports listener again2 attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 0)
		Gateway infra/ports listener again2 attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=True HostnameConflict: listener conflicts with an earlier listener on port 82 (gen 0)
		Gateway infra/ports listener again2 attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/ports listener again2 attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports listener status-port attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 0)
		Gateway infra/ports listener status-port attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/ports listener status-port attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 0)
		Gateway infra/ports listener status-port attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports listener status.port attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: gateway-api Gateway infra/ports-istio-autogenerated-k8s-gateway-status.port: document 1: spec.servers[0].port.name: "status.port" is not a valid port name (lower-case letters, digits and '-') (gen 0)
		Gateway infra/ports listener status.port attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/ports listener status.port attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/ports listener status.port attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		Gateway infra/ports-istio-autogenerated-k8s-gateway-a-very-long-listener-name-that-is-more-than-sixty-three-characters-long map[internal.istio.io/parents:Gateway/ports.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"ports","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"a-very-long-listener-name-that-is-more-than-sixty-three-characters-long","number":82,"protocol":"HTTP"}}]}
		Gateway infra/ports-istio-autogenerated-k8s-gateway-again map[internal.istio.io/parents:Gateway/ports.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"ports","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/x.example.com"],"port":{"name":"again","number":80,"protocol":"HTTP"}}]}
		Gateway infra/ports-istio-autogenerated-k8s-gateway-status-port map[internal.istio.io/parents:Gateway/ports.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"ports","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"status-port","number":81,"protocol":"HTTP"}}]}
		Gateway infra/tls Accepted=False ListenersNotValid: spec.tls: not supported by Strait yet (gen 0)
		Gateway infra/tls Programmed=False Invalid: the Gateway is not accepted (gen 0)
		Gateway infra/tls listener http attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=False Invalid: the Gateway is not accepted: spec.tls: not supported by Strait yet (gen 0)
		Gateway infra/tls listener http attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 0)
		Gateway infra/tls listener http attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=False Invalid: the listener is not served (gen 0)
		Gateway infra/tls listener http attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 0)
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		GatewayClass /params Accepted=False InvalidParameters: spec.parametersRef: not supported by Strait yet (gen 4)
		HTTPRoute infra/r parent[0] /ports//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/r parent[0] /ports//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/r parent[1] /addr//istio.io/gateway-controller Accepted=False NoMatchingParent: the parent Gateway is not accepted: spec.addresses: not supported by Strait yet (straitd deploys the gateway itself; remove the addresses) (gen 0)
		HTTPRoute infra/r parent[1] /addr//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/r parent[2] /none//istio.io/gateway-controller Accepted=False NoMatchingParent: the parent Gateway is not accepted: no listener is valid (see the listeners' conditions) (gen 0)
		HTTPRoute infra/r parent[2] /none//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/r parent[3] /ports/again/istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/r parent[3] /ports/again/istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		VirtualService infra/infra.ports.infra.svc.cluster.local map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["mesh"],"hosts":["ports.infra.svc.cluster.local"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/ports-istio-autogenerated-k8s-gateway-again-x.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/ports-istio-autogenerated-k8s-gateway-again"],"hosts":["x.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		deploy infra/empty [{Name:status-port Port:15021 AppProtocol:tcp}]
		deploy infra/ports [{Name:status-port Port:15021 AppProtocol:tcp} {Name:status-port-80 Port:80 AppProtocol:http} {Name:status-port-81 Port:81 AppProtocol:http} {Name:a-very-long-listener-name-that-is-more-than-sixty-three-charact Port:82 AppProtocol:http}]
`},
	{"allowedRoutes", gwHeader + `
  - {name: same, port: 80, protocol: HTTP, hostname: same.example.com}
  - {name: sel, port: 80, protocol: HTTP, hostname: sel.example.com, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}}
  - {name: nosel, port: 80, protocol: HTTP, hostname: nosel.example.com, allowedRoutes: {namespaces: {from: Selector}}}
  - {name: badsel, port: 80, protocol: HTTP, hostname: badsel.example.com, allowedRoutes: {namespaces: {from: Selector, selector: {matchExpressions: [{key: team, operator: Bogus}]}}}}
  - {name: grpconly, port: 80, protocol: HTTP, hostname: grpc.example.com, allowedRoutes: {namespaces: {from: All}, kinds: [{kind: GRPCRoute}]}}
  - {name: all, port: 81, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: apps, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nons, namespace: nons}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: sel}, {name: gw, namespace: infra, port: 81}, {name: gw, namespace: infra, port: 99}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: local, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["*.example.com", other.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nohost, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: same}]
  hostnames: [other.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener all attached=3 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener all attached=3 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener all attached=3 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener all attached=3 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener badsel attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener badsel attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener badsel attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener badsel attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener grpconly attached=0 kinds=[GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener grpconly attached=0 kinds=[GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener grpconly attached=0 kinds=[GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener grpconly attached=0 kinds=[GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener nosel attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener nosel attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener nosel attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener nosel attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener same attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener same attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener same attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener same attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener sel attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener sel attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener sel attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener sel attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-all map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"all","number":81,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-badsel map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/badsel.example.com"],"port":{"name":"badsel","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-grpconly map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/grpc.example.com"],"port":{"name":"grpconly","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-nosel map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/nosel.example.com"],"port":{"name":"nosel","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-same map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/same.example.com"],"port":{"name":"same","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-sel map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/sel.example.com"],"port":{"name":"sel","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute apps/apps parent[0] infra/gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute apps/apps parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/local parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/local parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/nohost parent[0] /gw/same/istio.io/gateway-controller Accepted=False NoMatchingListenerHostname: no hostname of the route matches a listener's hostname (gen 0)
		HTTPRoute infra/nohost parent[0] /gw/same/istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute nons/nons parent[0] infra/gw/sel/istio.io/gateway-controller Accepted=False NotAllowedByListeners: no listener of the Gateway allows a HTTPRoute of namespace nons (gen 0)
		HTTPRoute nons/nons parent[0] infra/gw/sel/istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute nons/nons parent[1] infra/gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute nons/nons parent[1] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute nons/nons parent[2] infra/gw//istio.io/gateway-controller Accepted=False NoMatchingParent: no listener of the Gateway matches the parentRef's sectionName and port (gen 0)
		HTTPRoute nons/nons parent[2] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-all-other.org map[internal.istio.io/parents:HTTPRoute/local.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-all"],"hosts":["other.org"],"http":[{"name":"infra.local.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-all-wildcard map[internal.istio.io/parents:HTTPRoute/apps.apps,HTTPRoute/nons.nons] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-all"],"hosts":["*"],"http":[{"name":"apps.apps.0","route":[{"destination":{"host":"web.apps.svc.cluster.local","port":{"number":80}}}]},{"name":"nons.nons.0","route":[{"destination":{"host":"web.nons.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-all-wildcard.example.com map[internal.istio.io/parents:HTTPRoute/local.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-all"],"hosts":["*.example.com"],"http":[{"name":"infra.local.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-same-same.example.com map[internal.istio.io/parents:HTTPRoute/local.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-same"],"hosts":["same.example.com"],"http":[{"name":"infra.local.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-sel-sel.example.com map[internal.istio.io/parents:HTTPRoute/apps.apps] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-sel"],"hosts":["sel.example.com"],"http":[{"name":"apps.apps.0","route":[{"destination":{"host":"web.apps.svc.cluster.local","port":{"number":80}}}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:same Port:80 AppProtocol:http} {Name:all Port:81 AppProtocol:http}]
`},
	{"hostnames", gwHeader + `
  - {name: wild, port: 80, protocol: HTTP, hostname: "*.example.com"}
  - {name: sub, port: 80, protocol: HTTP, hostname: "*.foo.example.com"}
  - {name: exact, port: 80, protocol: HTTP, hostname: abc.foo.example.com}
  - {name: any, port: 80, protocol: HTTP}
  - {name: other, port: 81, protocol: HTTP, hostname: "*.example.com"}
  - {name: star-com, port: 82, protocol: HTTP, hostname: "*.com"}
  - {name: a-com, port: 82, protocol: HTTP, hostname: a.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["*.example.com", abc.foo.example.com, x.foo.example.com, y.example.com, example.com, "*.com", y.example.com, "*.foo.example.com", a.com, averyveryverylonghost.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: late, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [z.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener a-com attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener a-com attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener a-com attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener a-com attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener any attached=2 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener any attached=2 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener any attached=2 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener any attached=2 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener exact attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener exact attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener exact attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener exact attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener other attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener other attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener other attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener other attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener star-com attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener star-com attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener star-com attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener star-com attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener sub attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener sub attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener sub attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener sub attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener wild attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener wild attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener wild attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener wild attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-a-com map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/a.com"],"port":{"name":"a-com","number":82,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-any map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"any","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-exact map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/abc.foo.example.com"],"port":{"name":"exact","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-other map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*.example.com"],"port":{"name":"other","number":81,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-star-com map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*.com"],"port":{"name":"star-com","number":82,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-sub map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*.foo.example.com"],"port":{"name":"sub","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-wild map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*.example.com"],"port":{"name":"wild","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute infra/late parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/late parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/r parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/r parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-a-com-a.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-a-com"],"hosts":["a.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-any-a.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-any"],"hosts":["a.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-any-averyveryverylonghost.org map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-any"],"hosts":["averyveryverylonghost.org"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-any-example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-any"],"hosts":["example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-any-wildcard.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-any"],"hosts":["*.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-any-z.org map[internal.istio.io/parents:HTTPRoute/late.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-any"],"hosts":["z.org"],"http":[{"name":"infra.late.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-exact-abc.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-exact"],"hosts":["abc.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-other-abc.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-other"],"hosts":["abc.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-other-wildcard.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-other"],"hosts":["*.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-other-x.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-other"],"hosts":["x.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-other-y.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-other"],"hosts":["y.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-star-com-abc.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-star-com"],"hosts":["abc.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-star-com-example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-star-com"],"hosts":["example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-star-com-wildcard.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-star-com"],"hosts":["*.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-star-com-x.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-star-com"],"hosts":["x.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-star-com-y.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-star-com"],"hosts":["y.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-sub-wildcard.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-sub"],"hosts":["*.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-sub-x.foo.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-sub"],"hosts":["x.foo.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-wild-wildcard.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-wild"],"hosts":["*.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-wild-y.example.com map[internal.istio.io/parents:HTTPRoute/r.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-wild"],"hosts":["y.example.com"],"http":[{"name":"infra.r.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:wild Port:80 AppProtocol:http} {Name:other Port:81 AppProtocol:http} {Name:star-com Port:82 AppProtocol:http}]
`},
	{"http filters", gwHeader + `
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f0, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /r1}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301, hostname: h.example.com}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f1, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /r2}}]
    filters: [{type: RequestRedirect, requestRedirect: {port: 8443, path: {type: ReplaceFullPath, replaceFullPath: /full}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f2, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /r3/}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 302, path: {type: ReplacePrefixMatch, replacePrefixMatch: /p}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f3, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /w1}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: w.example.com, path: {type: ReplaceFullPath, replaceFullPath: /new}}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f4, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /w2}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /x/}}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f5, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /w3}}]
    filters: [{type: URLRewrite, urlRewrite: {}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f6, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /h}, headers: [{name: X-A, value: a}, {name: x-a, value: b}, {name: x-r, type: RegularExpression, value: "r.*"}], queryParams: [{name: q, value: "1"}, {name: q, value: "2"}, {name: qr, type: RegularExpression, value: "[0-9]+"}], method: POST}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Set, value: "1"}, {name: x-set, value: "2"}, {name: x-space, value: "a b"}], add: [{name: x-add, value: "a\tb"}], remove: [x-gone]}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-resp, value: r}]}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: missing, port: 80}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}, fraction: {numerator: 1, denominator: 4}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: mirror2, port: 80}, fraction: {numerator: 30}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: mirror3, port: 80}, percent: 5}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: missing, port: 80}}}
    backendRefs:
    - {name: a, port: 80, weight: 3, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-b, value: a}]}}, {type: ResponseHeaderModifier, responseHeaderModifier: {remove: [x-c]}}]}
    - {name: b, port: 80, weight: 1}
    - {name: c, port: 80, weight: 0}
    - {name: missing, port: 80, weight: 4}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f7, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t1}}]
    timeouts: {request: 10s, backendRequest: 2s}
    retry: {codes: [503, 502], attempts: 3, backoff: 100ms}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f8, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t2}}]
    timeouts: {backendRequest: 2s}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f12, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t4}}]
    retry: {attempts: 0, codes: [500]}
    timeouts: {request: 3s}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f13, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t5}}]
    retry: {attempts: 0}
    timeouts: {request: 5s, backendRequest: 2s}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f14, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t6}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: r.example.com}}, {type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}}}]
    retry: {attempts: 1}
    timeouts: {request: 5s}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f9, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /t3}}]
    timeouts: {request: 0s, backendRequest: 0s}
    retry: {}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f10, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/re/.*"}}, {headers: [{name: only, value: h}]}]
    backendRefs: [{name: missing, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f11, namespace: infra, generation: 4}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 80, weight: 0}]
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener http attached=15 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=15 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=15 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=15 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute infra/f0 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f0 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f1 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f1 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f10 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f10 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[0].backendRefs[0]: backend(missing.infra.svc.cluster.local) not found (gen 4)
		HTTPRoute infra/f11 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f11 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f12 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/f12 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/f13 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/f13 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/f14 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/f14 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/f2 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f2 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f3 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f3 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f4 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f4 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f5 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f5 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f6 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f6 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[0].backendRefs[3]: backend(missing.infra.svc.cluster.local) not found (gen 4)
		HTTPRoute infra/f7 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f7 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f8 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f8 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		HTTPRoute infra/f9 parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 4)
		HTTPRoute infra/f9 parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 4)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-http-wildcard map[internal.istio.io/parents:HTTPRoute/f0.infra,HTTPRoute/f1.infra,HTTPRoute/f10.infra,HTTPRoute/f11.infra,HTTPRoute/f12.infra,HTTPRoute/f13.infra,HTTPRoute/f14.infra,HTTPRoute/f2.infra,HTTPRoute/f3.infra,HTTPRoute/f4.infra,HTTPRoute/f5.infra,HTTPRoute/f6.infra,HTTPRoute/f7.infra,HTTPRoute/f8.infra,HTTPRoute/f9.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-http"],"hosts":["*"],"http":[{"match":[{"uri":{"exact":"/r1"}}],"name":"infra.f0.0","redirect":{"authority":"h.example.com","derivePort":"FROM_PROTOCOL_DEFAULT","redirectCode":301,"scheme":"https"}},{"match":[{"uri":{"exact":"/r2"}}],"name":"infra.f1.0","redirect":{"port":8443,"uri":"/full"}},{"match":[{"uri":{"exact":"/t4"}}],"name":"infra.f12.0","retries":{},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}],"timeout":"3s"},{"match":[{"uri":{"exact":"/t5"}}],"name":"infra.f13.0","retries":{},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}],"timeout":"2s"},{"directResponse":{"status":500},"match":[{"uri":{"exact":"/t6"}}],"name":"infra.f14.0"},{"match":[{"uri":{"exact":"/w1"}}],"name":"infra.f3.0","rewrite":{"authority":"w.example.com","uriRegexRewrite":{"match":"/.*","rewrite":"/new"}},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"exact":"/w3"}}],"name":"infra.f5.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"exact":"/t1"}}],"name":"infra.f7.0","retries":{"attempts":3,"backoff":"0.100s","perTryTimeout":"2s","retryOn":"connect-failure,refused-stream,unavailable,cancelled,503,502"},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}],"timeout":"10s"},{"match":[{"uri":{"exact":"/t2"}}],"name":"infra.f8.0","route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}],"timeout":"2s"},{"match":[{"uri":{"exact":"/t3"}}],"name":"infra.f9.0","retries":{"attempts":2,"retryOn":"connect-failure,refused-stream,unavailable,cancelled"},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]},{"fault":{"abort":{"httpStatus":500,"percentage":{"value":50}}},"headers":{"request":{"add":{"x-add":"a\tb"},"remove":["x-gone"],"set":{"x-set":"1","x-space":"a b"}},"response":{"add":{"x-resp":"r"}}},"match":[{"headers":{"x-a":{"exact":"a"},"x-r":{"regex":"r.*"}},"method":{"exact":"POST"},"queryParams":{"q":{"exact":"1"},"qr":{"regex":"[0-9]+"}},"uri":{"exact":"/h"}}],"mirrors":[{"destination":{"host":"mirror.infra.svc.cluster.local","port":{"number":80}},"percentage":{"value":25}},{"destination":{"host":"mirror2.infra.svc.cluster.local","port":{"number":80}},"percentage":{"value":30}},{"destination":{"host":"mirror3.infra.svc.cluster.local","port":{"number":80}},"percentage":{"value":5}}],"name":"infra.f6.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":80}},"headers":{"request":{"set":{"x-b":"a"}},"response":{"remove":["x-c"]}},"weight":3},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":80}},"weight":1}]},{"match":[{"uri":{"prefix":"/r3"}}],"name":"infra.f2.0","redirect":{"derivePort":"FROM_REQUEST_PORT","prefixRewrite":"/p","redirectCode":302}},{"match":[{"uri":{"prefix":"/w2"}}],"name":"infra.f4.0","rewrite":{"uri":"/x"},"route":[{"destination":{"host":"web.infra.svc.cluster.local","port":{"number":80}}}]},{"directResponse":{"status":500},"match":[{"uri":{"regex":"/re/.*"}}],"name":"infra.f10.0"},{"directResponse":{"status":500},"match":[{"headers":{"only":{"exact":"h"}}}],"name":"infra.f10.0"},{"directResponse":{"status":500},"name":"infra.f11.0"}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http}]
`},
	{"http refusals", gwHeader + `
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: redirect-backend, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}], backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-backoff, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{retry: {backoff: 1x}, backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-request-timeout, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{timeouts: {request: 1x}, backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-backend-timeout, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{timeouts: {backendRequest: 1x}, backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-header, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: x, value: "a\nb"}]}}], backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-resp-header, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x, value: "a\u007f"}]}}], backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nil-filters, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {filters: [{type: RequestHeaderModifier}], backendRefs: [{name: web, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nil-redirect, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestRedirect}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nil-rewrite, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: URLRewrite}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nil-mirror, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestMirror}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ext-filter, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: ExtensionRef, extensionRef: {group: g, kind: K, name: n}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: backend-filter, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80, filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 80}}}]}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: backend-nil-filter, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80, filters: [{type: ResponseHeaderModifier}]}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: dotted, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web.infra, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: noport, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: kinds, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80, kind: ServiceImport, group: multicluster.x-k8s.io}, {name: s, port: 80, group: "", kind: Service, namespace: infra}, {name: p, port: 80, kind: Pod}, {name: e, port: 80, group: example.com, kind: Service}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: two-unresolved, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: missing, port: 80}]
  - backendRefs: [{name: p, port: 80, kind: Pod}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: a-unbound, namespace: infra}
spec:
  parentRefs: [{name: nosuch}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: xns, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: granted, port: 80, namespace: apps}, {name: other, port: 80, namespace: apps}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: badmatch, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{path: {type: Bogus, value: /x}}], backendRefs: [{name: web, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: badheader, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{headers: [{name: a, value: b, type: Bogus}]}], backendRefs: [{name: web, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: badquery, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{queryParams: [{name: a, value: b, type: Bogus}]}], backendRefs: [{name: web, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: badregex, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{path: {type: RegularExpression, value: "(("}}], backendRefs: [{name: web, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: apps}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}]
  to: [{group: "", kind: Service, name: granted}, {group: example.com, kind: Service}, {group: "", kind: Pod}]
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute infra/backend-filter parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].backendRefs[0].filters[0].type: filter RequestMirror on a backendRef is not supported by Strait yet (gen 0)
		HTTPRoute infra/backend-filter parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/backend-nil-filter parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].backendRefs[0].filters[0].responseHeaderModifier: must be set for its filter type (gen 0)
		HTTPRoute infra/backend-nil-filter parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/bad-backend-timeout parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].timeouts.backendRequest: time: unknown unit "x" in duration "1x" (gen 0)
		HTTPRoute infra/bad-backend-timeout parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/bad-backoff parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].retry.backoff: time: unknown unit "x" in duration "1x" (gen 0)
		HTTPRoute infra/bad-backoff parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/bad-header parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].requestHeaderModifier: header "x" value contains invalid characters (gen 0)
		HTTPRoute infra/bad-header parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/bad-request-timeout parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].timeouts.request: time: unknown unit "x" in duration "1x" (gen 0)
		HTTPRoute infra/bad-request-timeout parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/bad-resp-header parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].responseHeaderModifier: header "x" value contains invalid characters (gen 0)
		HTTPRoute infra/bad-resp-header parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/badheader parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].matches[0].headers[0].type: "Bogus" is not supported (gen 0)
		HTTPRoute infra/badheader parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/badmatch parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].matches[0].path.type: "Bogus" is not supported (gen 0)
		HTTPRoute infra/badmatch parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/badquery parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].matches[0].queryParams[0].type: "Bogus" is not supported (gen 0)
		HTTPRoute infra/badquery parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/badregex parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: the translated VirtualService is refused: gateway-api VirtualService infra/badregex: document 1: spec.http[0].match[0].uri.regex: "((" is not a valid RE2 regular expression: error parsing regexp: missing closing ): '((' (gen 0)
		HTTPRoute infra/badregex parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/dotted parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].backendRefs[0].name: service name invalid; the name of the Service must be used, not the hostname (gen 0)
		HTTPRoute infra/dotted parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/ext-filter parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].type: filter ExtensionRef is not supported by Strait yet (gen 0)
		HTTPRoute infra/ext-filter parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/kinds parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/kinds parent[0] /gw//istio.io/gateway-controller ResolvedRefs=False InvalidKind: spec.rules[0].backendRefs[3]: referencing unsupported backendRef: group "example.com" kind "Service" (gen 0)
		HTTPRoute infra/nil-filters parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].requestHeaderModifier: must be set for its filter type (gen 0)
		HTTPRoute infra/nil-filters parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/nil-mirror parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].requestMirror: must be set for type RequestMirror (gen 0)
		HTTPRoute infra/nil-mirror parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/nil-redirect parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].requestRedirect: must be set for type RequestRedirect (gen 0)
		HTTPRoute infra/nil-redirect parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/nil-rewrite parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].urlRewrite: must be set for type URLRewrite (gen 0)
		HTTPRoute infra/nil-rewrite parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/noport parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].backendRefs[0].port: port is required in backendRef (gen 0)
		HTTPRoute infra/noport parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/redirect-backend parent[0] /gw//istio.io/gateway-controller Accepted=False IncompatibleFilters: spec.rules[0]: a RequestRedirect filter and backendRefs cannot be combined (gen 0)
		HTTPRoute infra/redirect-backend parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/two-unresolved parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/two-unresolved parent[0] /gw//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[0].backendRefs[0]: backend(missing.infra.svc.cluster.local) not found (gen 0)
		HTTPRoute infra/xns parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/xns parent[0] /gw//istio.io/gateway-controller ResolvedRefs=False RefNotPermitted: spec.rules[0].backendRefs[1]: backendRef apps/other not accessible to a HTTPRoute in namespace "infra" (missing a ReferenceGrant?) (gen 0)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-http-wildcard map[internal.istio.io/parents:HTTPRoute/kinds.infra,HTTPRoute/two-unresolved.infra,HTTPRoute/xns.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-http"],"hosts":["*"],"http":[{"fault":{"abort":{"httpStatus":500,"percentage":{"value":75}}},"name":"infra.kinds.0","route":[{"destination":{"host":"s.infra.svc.cluster.local","port":{"number":80}}}]},{"directResponse":{"status":500},"name":"infra.two-unresolved.0"},{"directResponse":{"status":500},"name":"infra.two-unresolved.1"},{"fault":{"abort":{"httpStatus":500,"percentage":{"value":50}}},"name":"infra.xns.0","route":[{"destination":{"host":"granted.apps.svc.cluster.local","port":{"number":80}}}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http}]
`},
	{"precedence", gwHeader + `
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: b, namespace: infra, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{path: {type: PathPrefix, value: /a}}], backendRefs: [{name: b1, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a/long}}], backendRefs: [{name: b2, port: 80}]}
  - {matches: [{path: {type: Exact, value: /a}}], backendRefs: [{name: b3, port: 80}]}
  - {matches: [{path: {type: RegularExpression, value: /a.*}}], backendRefs: [{name: b4, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a}, method: GET}], backendRefs: [{name: b5, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: h, value: v}, {name: i, value: v}]}], backendRefs: [{name: b6, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: h, value: v}]}], backendRefs: [{name: b7, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a}, queryParams: [{name: q, value: v}]}], backendRefs: [{name: b8, port: 80}]}
  - {matches: [{path: {type: RegularExpression, value: /a/longer.*}}], backendRefs: [{name: b9, port: 80}]}
  - {matches: [{headers: [{name: h, value: v}]}], backendRefs: [{name: b10, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: a, namespace: infra, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {backendRefs: [{name: a0, port: 80}]}
  - {matches: [{path: {type: PathPrefix, value: /a}}], backendRefs: [{name: a1, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: z, namespace: infra, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - {matches: [{path: {type: PathPrefix, value: /a}}], backendRefs: [{name: z1, port: 80}]}
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=3 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute infra/a parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/a parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/b parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/b parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute infra/z parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute infra/z parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-http-wildcard map[internal.istio.io/parents:HTTPRoute/z.infra,HTTPRoute/a.infra,HTTPRoute/b.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-http"],"hosts":["*"],"http":[{"match":[{"uri":{"exact":"/a"}}],"name":"infra.b.2","route":[{"destination":{"host":"b3.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a/long(/.*)?"}}],"name":"infra.b.1","route":[{"destination":{"host":"b2.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"method":{"exact":"GET"},"uri":{"regex":"/a(/.*)?"}}],"name":"infra.b.4","route":[{"destination":{"host":"b5.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"headers":{"h":{"exact":"v"},"i":{"exact":"v"}},"uri":{"regex":"/a(/.*)?"}}],"name":"infra.b.5","route":[{"destination":{"host":"b6.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"headers":{"h":{"exact":"v"}},"uri":{"regex":"/a(/.*)?"}}],"name":"infra.b.6","route":[{"destination":{"host":"b7.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"queryParams":{"q":{"exact":"v"}},"uri":{"regex":"/a(/.*)?"}}],"name":"infra.b.7","route":[{"destination":{"host":"b8.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a(/.*)?"}}],"name":"infra.z.0","route":[{"destination":{"host":"z1.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a(/.*)?"}}],"name":"infra.a.1","route":[{"destination":{"host":"a1.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a(/.*)?"}}],"name":"infra.b.0","route":[{"destination":{"host":"b1.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a/longer.*"}}],"name":"infra.b.8","route":[{"destination":{"host":"b9.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"uri":{"regex":"/a.*"}}],"name":"infra.b.3","route":[{"destination":{"host":"b4.infra.svc.cluster.local","port":{"number":80}}}]},{"match":[{"headers":{"h":{"exact":"v"}}}],"name":"infra.b.9","route":[{"destination":{"host":"b10.infra.svc.cluster.local","port":{"number":80}}}]},{"name":"infra.a.0","route":[{"destination":{"host":"a0.infra.svc.cluster.local","port":{"number":80}}}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http}]
`},
	{"grpc", gwHeader + `
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: infra, generation: 5}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
  - matches:
    - method: {service: s.S}
    - method: {method: M}
    - method: {service: s.S, method: M}
    - method: {type: RegularExpression, service: "s\\..*"}
    - method: {type: RegularExpression, service: s.S, method: "M.*"}
    - headers: [{name: x-e, value: e}, {name: x-r, type: RegularExpression, value: "r.*"}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-q, value: q}]}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-p, value: p}]}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 80}}}
    backendRefs:
    - {name: a, port: 9000, weight: 2, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-a, value: a}]}}, {type: ResponseHeaderModifier, responseHeaderModifier: {remove: [x-b]}}]}
    - {name: b, port: 9000}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: empty-method, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [e.example.com]
  rules: [{matches: [{method: {}}], backendRefs: [{name: a, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: bad-type, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [e.example.com]
  rules: [{backendRefs: [{name: a, port: 9000}]}, {matches: [{method: {type: Bogus, service: s}}], backendRefs: [{name: a, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: session, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [e.example.com]
  rules: [{sessionPersistence: {sessionName: s}, backendRefs: [{name: a, port: 9000}]}, {filters: [{type: ExtensionRef, extensionRef: {group: g, kind: K, name: n}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: ext, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [e.example.com]
  rules: [{filters: [{type: ExtensionRef, extensionRef: {group: g, kind: K, name: n}}], backendRefs: [{name: a, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: backend-mirror, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  hostnames: [e.example.com]
  rules: [{backendRefs: [{name: a, port: 9000, filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 80}}}]}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: a-unbound, namespace: infra}
spec:
  parentRefs: [{name: nosuch}]
  rules: [{backendRefs: [{name: a, port: 9000}]}]
`, `
		GRPCRoute infra/backend-mirror parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].backendRefs[0].filters[0].type: filter RequestMirror on a backendRef is not supported by Strait yet (gen 0)
		GRPCRoute infra/backend-mirror parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		GRPCRoute infra/bad-type parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[1].matches[0].method.type: "Bogus" is not supported (gen 0)
		GRPCRoute infra/bad-type parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		GRPCRoute infra/empty-method parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].matches[0].method: a gRPC match must have a method or a service (gen 0)
		GRPCRoute infra/empty-method parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		GRPCRoute infra/ext parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].filters[0].type: filter ExtensionRef is not supported by Strait yet (gen 0)
		GRPCRoute infra/ext parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		GRPCRoute infra/g parent[0] /gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 5)
		GRPCRoute infra/g parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 5)
		GRPCRoute infra/session parent[0] /gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[0].sessionPersistence: not supported by Strait yet (gen 0)
		GRPCRoute infra/session parent[0] /gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener http attached=1 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=1 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=1 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=1 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-http-grpc.example.com map[internal.istio.io/parents:GRPCRoute/g.infra] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-http"],"hosts":["grpc.example.com"],"http":[{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"uri":{"exact":"/s.S/M"}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]},{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"uri":{"regex":"/s\\..*/.+"}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]},{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"uri":{"regex":"/[^/]+/M"}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]},{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"uri":{"regex":"/s.S/M.*"}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]},{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"uri":{"regex":"/s.S/.*"}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]},{"headers":{"request":{"set":{"x-q":"q"}},"response":{"add":{"x-p":"p"}}},"match":[{"headers":{"x-e":{"exact":"e"},"x-r":{"regex":"r.*"}}}],"mirrors":[{"destination":{"host":"m.infra.svc.cluster.local","port":{"number":80}}}],"name":"infra.g.0","route":[{"destination":{"host":"a.infra.svc.cluster.local","port":{"number":9000}},"headers":{"request":{"set":{"x-a":"a"}},"response":{"remove":["x-b"]}},"weight":2},{"destination":{"host":"b.infra.svc.cluster.local","port":{"number":9000}},"weight":1}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http}]
`},
	{"stream", gwHeader + `
  - {name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}, allowedRoutes: {namespaces: {from: All}}}
  - {name: tcp, port: 5432, protocol: TCP, allowedRoutes: {namespaces: {from: All}}}
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: t, namespace: apps, generation: 7}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [a.example.com, b.example.com]
  rules:
  - backendRefs: [{name: missing, port: 443}]
  - backendRefs: [{name: missing, port: 443}, {name: a, port: 443, weight: 2}, {name: c, port: 443, weight: 0}, {name: b, port: 443}]
  - backendRefs: [{name: x, namespace: other, port: 443}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: refused, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [r.example.com]
  rules:
  - backendRefs: [{name: a, port: 443}]
  - backendRefs: [{name: noport}]
  - backendRefs: [{name: a.b, port: 443}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: badport, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [p.example.com]
  rules: [{backendRefs: [{name: a, port: 70000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: a-unbound, namespace: apps}
spec:
  parentRefs: [{name: nosuch}]
  rules: [{backendRefs: [{name: a, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: p, namespace: apps, generation: 3}
spec:
  parentRefs: [{name: gw, namespace: infra}, {name: web, kind: Service, group: ""}]
  rules:
  - backendRefs: [{name: c, port: 5432, weight: 0}, {name: a, port: 5432}, {name: b, port: 5432, weight: 3}]
  - backendRefs: [{name: missing, port: 5432}]
  - backendRefs: [{name: granted, namespace: other, port: 5432}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: refused, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules:
  - backendRefs: [{name: a, port: 5432}]
  - backendRefs: [{name: a.b, port: 5432}]
  - backendRefs: [{name: noport}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: badport, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules: [{backendRefs: [{name: a, port: 70000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: a-unbound, namespace: apps}
spec:
  parentRefs: [{name: nosuch}]
  rules: [{backendRefs: [{name: a, port: 5432}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: TCPRoute, namespace: apps}]
  to: [{group: "", kind: Service, name: granted}]
`, `
		Gateway infra/gw Accepted=True Accepted: Resource accepted (gen 2)
		Gateway infra/gw Programmed=False AddressNotAssigned: Failed to assign to any requested addresses: service infra/gw-istio does not exist yet (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute GRPCRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute GRPCRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute GRPCRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener http attached=0 kinds=[HTTPRoute GRPCRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener tcp attached=1 kinds=[TCPRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener tcp attached=1 kinds=[TCPRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener tcp attached=1 kinds=[TCPRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener tcp attached=1 kinds=[TCPRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw listener tls attached=1 kinds=[TLSRoute] Accepted=True Accepted: No errors found (gen 2)
		Gateway infra/gw listener tls attached=1 kinds=[TLSRoute] Conflicted=False NoConflicts: No errors found (gen 2)
		Gateway infra/gw listener tls attached=1 kinds=[TLSRoute] Programmed=True Programmed: No errors found (gen 2)
		Gateway infra/gw listener tls attached=1 kinds=[TLSRoute] ResolvedRefs=True ResolvedRefs: No errors found (gen 2)
		Gateway infra/gw-istio-autogenerated-k8s-gateway-http map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"http","number":80,"protocol":"HTTP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-tcp map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"tcp","number":5432,"protocol":"TCP"}}]}
		Gateway infra/gw-istio-autogenerated-k8s-gateway-tls map[internal.istio.io/parents:Gateway/gw.infra] {"selector":{"gateway.networking.k8s.io/gateway-name":"gw","gateway.strait.io/namespace":"infra"},"servers":[{"hosts":["*/*"],"port":{"name":"tls","number":443,"protocol":"TLS"},"tls":{}}]}
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		TCPRoute apps/badport parent[0] infra/gw//istio.io/gateway-controller Accepted=False UnsupportedValue: the translated VirtualService is refused: gateway-api VirtualService apps/badport: document 1: spec.tcp[0].route[0].destination.port.number: 70000 is not a valid port (1-65535) (gen 0)
		TCPRoute apps/badport parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		TCPRoute apps/p parent[0] infra/gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 3)
		TCPRoute apps/p parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[1].backendRefs[0]: backend(missing.apps.svc.cluster.local) not found (gen 3)
		TCPRoute apps/p parent[1] /web//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.parentRefs[1]: a Service parent (the mesh, GAMMA) of a TCPRoute is not supported by Strait yet (gen 3)
		TCPRoute apps/p parent[1] /web//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[1].backendRefs[0]: backend(missing.apps.svc.cluster.local) not found (gen 3)
		TCPRoute apps/refused parent[0] infra/gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[1].backendRefs[0].name: service name invalid; the name of the Service must be used, not the hostname (gen 0)
		TCPRoute apps/refused parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		TLSRoute apps/badport parent[0] infra/gw//istio.io/gateway-controller Accepted=False UnsupportedValue: the translated VirtualService is refused: gateway-api VirtualService apps/badport: document 1: spec.tls[0].route[0].destination.port.number: 70000 is not a valid port (1-65535) (gen 0)
		TLSRoute apps/badport parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		TLSRoute apps/refused parent[0] infra/gw//istio.io/gateway-controller Accepted=False UnsupportedValue: spec.rules[1].backendRefs[0].port: port is required in backendRef (gen 0)
		TLSRoute apps/refused parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		TLSRoute apps/t parent[0] infra/gw//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 7)
		TLSRoute apps/t parent[0] infra/gw//istio.io/gateway-controller ResolvedRefs=False RefNotPermitted: spec.rules[2].backendRefs[0]: backendRef other/x not accessible to a TLSRoute in namespace "apps" (missing a ReferenceGrant?) (gen 7)
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-tcp-wildcard map[internal.istio.io/parents:TCPRoute/p.apps] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-tcp"],"hosts":["*"],"tcp":[{"route":[{"destination":{"host":"a.apps.svc.cluster.local","port":{"number":5432}},"weight":1},{"destination":{"host":"b.apps.svc.cluster.local","port":{"number":5432}},"weight":3}]},{"route":[{"destination":{"host":"granted.other.svc.cluster.local","port":{"number":5432}}}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-tls-a.example.com map[internal.istio.io/parents:TLSRoute/t.apps] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-tls"],"hosts":["a.example.com"],"tls":[{"match":[{"sniHosts":["a.example.com"]}],"route":[{"destination":{"host":"a.apps.svc.cluster.local","port":{"number":443}},"weight":2},{"destination":{"host":"b.apps.svc.cluster.local","port":{"number":443}},"weight":1}]}]}
		VirtualService infra/gw-istio-autogenerated-k8s-gateway-tls-b.example.com map[internal.istio.io/parents:TLSRoute/t.apps] {"gateways":["infra/gw-istio-autogenerated-k8s-gateway-tls"],"hosts":["b.example.com"],"tls":[{"match":[{"sniHosts":["b.example.com"]}],"route":[{"destination":{"host":"a.apps.svc.cluster.local","port":{"number":443}},"weight":2},{"destination":{"host":"b.apps.svc.cluster.local","port":{"number":443}},"weight":1}]}]}
		deploy infra/gw [{Name:status-port Port:15021 AppProtocol:tcp} {Name:tls Port:443 AppProtocol:tls} {Name:tcp Port:5432 AppProtocol:tcp} {Name:http Port:80 AppProtocol:http}]
`},
	{"mesh", `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: p, namespace: apps, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 8080}, {group: "", kind: Service, name: web, sectionName: s}, {group: "", kind: Service, name: missing}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}, {headers: [{name: h, value: v}]}]
    backendRefs: [{name: web-v2, port: 8080, namespace: other}]
  - backendRefs: [{name: web, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: consumer, namespace: client, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: "", kind: Service, name: web, namespace: apps}]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-c, value: c}]}}]
    backendRefs: [{name: web, namespace: apps, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: apps, creationTimestamp: "2022-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: "", kind: Service, name: grpc, port: 9000}]
  rules:
  - matches: [{method: {service: s.S}}]
    backendRefs: [{name: grpc, port: 9000}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: empty, namespace: apps, creationTimestamp: "2023-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: "", kind: Service, name: nothing}]
  rules: [{backendRefs: [{name: missing, port: 80}]}]
`, `
		GRPCRoute apps/g parent[0] /grpc//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		GRPCRoute apps/g parent[0] /grpc//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		GatewayClass /istio Accepted=True Accepted: Handled by Istio controller (gen 0)
		HTTPRoute apps/empty parent[0] /nothing//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute apps/empty parent[0] /nothing//istio.io/gateway-controller ResolvedRefs=False BackendNotFound: spec.rules[0].backendRefs[0]: backend(missing.apps.svc.cluster.local) not found (gen 0)
		HTTPRoute apps/p parent[0] /web//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute apps/p parent[0] /web//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		HTTPRoute apps/p parent[1] /web/s/istio.io/gateway-controller Accepted=False UnsupportedValue: spec.parentRefs[1].sectionName: a Service parent's sectionName is not supported by Strait yet (use port) (gen 0)
		HTTPRoute apps/p parent[1] /web/s/istio.io/gateway-controller ResolvedRefs=False RefNotPermitted: spec.rules[0].backendRefs[0]: backendRef other/web-v2 not accessible to a HTTPRoute in namespace "apps" (missing a ReferenceGrant?) (gen 0)
		HTTPRoute apps/p parent[2] /missing//istio.io/gateway-controller Accepted=False NoMatchingParent: parent service: "missing" not found (gen 0)
		HTTPRoute apps/p parent[2] /missing//istio.io/gateway-controller ResolvedRefs=False RefNotPermitted: spec.rules[0].backendRefs[0]: backendRef other/web-v2 not accessible to a HTTPRoute in namespace "apps" (missing a ReferenceGrant?) (gen 0)
		HTTPRoute client/consumer parent[0] apps/web//istio.io/gateway-controller Accepted=True Accepted: Route was valid (gen 0)
		HTTPRoute client/consumer parent[0] apps/web//istio.io/gateway-controller ResolvedRefs=True ResolvedRefs: All references resolved (gen 0)
		VirtualService apps/apps.8080.web.apps.svc.cluster.local map[internal.istio.io/parents:HTTPRoute/p.apps] {"gateways":["mesh"],"hosts":["web.apps.svc.cluster.local"],"http":[{"match":[{"port":8080,"uri":{"regex":"/a(/.*)?"}}],"name":"apps.p.0","route":[{"destination":{"host":"web-v2.other.svc.cluster.local","port":{"number":8080}}}]},{"match":[{"headers":{"h":{"exact":"v"}},"port":8080}],"name":"apps.p.0","route":[{"destination":{"host":"web-v2.other.svc.cluster.local","port":{"number":8080}}}]},{"match":[{"port":8080}],"name":"apps.p.1","route":[{"destination":{"host":"web.apps.svc.cluster.local","port":{"number":8080}}}]}]}
		VirtualService apps/apps.9000.grpc.apps.svc.cluster.local map[internal.istio.io/parents:GRPCRoute/g.apps] {"gateways":["mesh"],"hosts":["grpc.apps.svc.cluster.local"],"http":[{"match":[{"port":9000,"uri":{"regex":"/s.S/.*"}}],"name":"apps.g.0","route":[{"destination":{"host":"grpc.apps.svc.cluster.local","port":{"number":9000}}}]}]}
		VirtualService apps/apps.nothing.apps.svc.cluster.local map[internal.istio.io/parents:HTTPRoute/empty.apps] {"gateways":["mesh"],"hosts":["nothing.apps.svc.cluster.local"],"http":[{"directResponse":{"status":500},"name":"apps.empty.0"}]}
		VirtualService client/client.web.apps.svc.cluster.local map[internal.istio.io/parents:HTTPRoute/consumer.client] {"exportTo":["client"],"gateways":["mesh"],"hosts":["web.apps.svc.cluster.local"],"http":[{"headers":{"request":{"set":{"x-c":"c"}}},"name":"client.consumer.0","route":[{"destination":{"host":"web.apps.svc.cluster.local","port":{"number":80}}}]}]}
`},
}

func TestTranslateCases(t *testing.T) {
	for _, tc := range translateCases {
		t.Run(tc.name, func(t *testing.T) {
			checkRender(t, Translate(objects(t, tc.in)), tc.want)
		})
	}
}
