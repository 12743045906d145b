package main

import (
	"testing"

	"github.com/straitmesh/strait/internal/install"
)

// straitctl uninstall deletes straitd's Leases by name.
func TestLeaseNamesMatchUninstall(t *testing.T) {
	if webhookLeaseName != install.WebhookLeaseName {
		t.Errorf("straitd elects with Lease %q but straitctl uninstall deletes %q", webhookLeaseName, install.WebhookLeaseName)
	}
	if statusLeaseName != install.StatusLeaseName {
		t.Errorf("straitd elects the status writer with Lease %q but straitctl uninstall deletes %q", statusLeaseName, install.StatusLeaseName)
	}
}
