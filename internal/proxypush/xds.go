package proxypush

// ProxyRequest is the reason of a push that answers a proxy's own
// DiscoveryRequest (a new subscription or a changed resource name list)
// rather than a change in the mesh.
const ProxyRequest TriggerReason = "proxyrequest"
