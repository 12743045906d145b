package main

import "github.com/spf13/cobra"

// newIptablesCmd is owned by the iptables work; placeholder.
func newIptablesCmd() *cobra.Command { return &cobra.Command{Use: "iptables"} }
