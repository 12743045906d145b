package main

import (
	"testing"

	"github.com/straitmesh/strait/internal/install"
)

// straitctl uninstall deletes straitd's webhook CA Lease by name.
func TestWebhookLeaseNameMatchesUninstall(t *testing.T) {
	if webhookLeaseName != install.WebhookLeaseName {
		t.Errorf("straitd elects with Lease %q but straitctl uninstall deletes %q", webhookLeaseName, install.WebhookLeaseName)
	}
}
