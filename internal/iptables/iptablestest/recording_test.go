package iptablestest_test

import (
	"context"
	"testing"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/iptables/iptablestest"
)

var (
	_ iptables.Runner = (*iptablestest.RecordingRunner)(nil)
	_ iptables.Router = (*iptablestest.RecordingRunner)(nil)
)

func TestRecordingRunnerSave(t *testing.T) {
	r := &iptablestest.RecordingRunner{Tables: map[string]string{"raw": "R\n", "nat": "N\n", "mangle": "M\n"}}
	if all, _ := r.Save(context.Background(), ""); all != "M\nN\nR\n" {
		t.Errorf("Save(\"\") = %q", all)
	}
	if nat, _ := r.Save(context.Background(), "nat"); nat != "N\n" {
		t.Errorf("Save(nat) = %q", nat)
	}
}
