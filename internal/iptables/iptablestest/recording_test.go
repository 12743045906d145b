package iptablestest_test

import (
	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/iptables/iptablestest"
)

var (
	_ iptables.Runner = (*iptablestest.RecordingRunner)(nil)
	_ iptables.Router = (*iptablestest.RecordingRunner)(nil)
)
