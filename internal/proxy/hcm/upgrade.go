package hcm

import (
	"fmt"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// This file is which HTTP/1.1 Upgrades (WebSocket and the like) the HCM's
// upgrade_configs allow; the exchange of an allowed one (a new upstream
// connection, then a byte tunnel on 101) is package forward/h1's
// (Exchange.ForwardUpgrade).

// buildUpgrades reads upgrade_configs: the upgrade types allowed.
func (f *Filter) buildUpgrades(h *hcmv3.HttpConnectionManager) error {
	for i, u := range h.GetUpgradeConfigs() {
		typ := strings.ToLower(u.GetUpgradeType())
		if typ == "" {
			return fmt.Errorf("upgrade_configs[%d].upgrade_type is empty", i)
		}
		if typ == "connect" {
			return fmt.Errorf("upgrade_configs[%d]: upgrade_type CONNECT is not supported", i)
		}
		if typ == "h2c" {
			// Envoy's HTTP/1 codec never upgrades to h2c: it drops the
			// Upgrade and serves the request as HTTP/1.1, as we do
			// whatever upgrade_configs says. Accepting the entry would
			// tunnel what Envoy does not.
			return fmt.Errorf("upgrade_configs[%d]: upgrade_type h2c is not supported (an h2c upgrade request is served as HTTP/1.1; clients that want HTTP/2 use prior knowledge)", i)
		}
		if len(u.GetFilters()) > 0 {
			return fmt.Errorf("upgrade_configs[%d].filters is not supported (upgrades use the HCM's filters)", i)
		}
		if u.GetEnabled() != nil && !u.GetEnabled().GetValue() {
			continue
		}
		if f.upgrades == nil {
			f.upgrades = map[string]bool{}
		}
		f.upgrades[typ] = true
	}
	return nil
}

// upgradeAllowed reports whether the request asks for an upgrade that the
// filter allows (the first protocol of the Upgrade header, without its
// version, as Envoy compares it).
func (f *Filter) upgradeAllowed(req *http1.Request) bool {
	if !req.Upgrade || len(f.upgrades) == 0 {
		return false
	}
	v, ok := req.Headers.Get("Upgrade")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(string(v), ",")
	name, _, _ := strings.Cut(strings.TrimSpace(first), "/")
	return f.upgrades[strings.ToLower(name)]
}
