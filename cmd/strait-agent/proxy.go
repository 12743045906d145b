package main

import "github.com/spf13/cobra"

// newProxyCmd is owned by the agent work; placeholder.
func newProxyCmd() *cobra.Command { return &cobra.Command{Use: "proxy"} }
