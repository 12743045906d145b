package iptables

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Backend is the iptables implementation to drive: the legacy (x_tables)
// one or the nf_tables one. Rules added through one are invisible to the
// other's save command, and both filter packets, so Strait uses whichever
// the namespace's existing rules use.
type Backend string

// Backends.
const (
	// BackendDefault runs iptables-save/iptables-restore, whatever the
	// system's alternative points to.
	BackendDefault Backend = ""
	BackendLegacy  Backend = "legacy"
	BackendNFT     Backend = "nft"
)

// CommandFunc builds a command, like exec.CommandContext (which nil means).
type CommandFunc func(ctx context.Context, name string, args ...string) *exec.Cmd

// Binaries returns the save and restore commands of family f.
func (b Backend) Binaries(f Family) (save, restore string) {
	base := "iptables"
	if f == IPv6 {
		base = "ip6tables"
	}
	if b != BackendDefault {
		base += "-" + string(b)
	}
	return base + "-save", base + "-restore"
}

// Runner returns an ExecRunner for family f that runs commands with command.
func (b Backend) Runner(f Family, command CommandFunc) ExecRunner {
	save, restore := b.Binaries(f)
	return ExecRunner{Command: command, SaveBinary: save, RestoreBinary: restore}
}

// System returns the System that drives this backend with command, `ip`
// included.
func (b Backend) System(command CommandFunc) System {
	return System{
		IPv4:   b.Runner(IPv4, command),
		IPv6:   b.Runner(IPv6, command),
		Router: ExecRunner{Command: command},
	}
}

// kubeHints are chains kubelet creates to tell other tools its backend.
var kubeHints = []string{":KUBE-IPTABLES-HINT", ":KUBE-KUBELET-CANARY"}

// DetectBackend chooses the backend the namespace's existing rules use, as
// Kubernetes' iptables-wrapper does: a kubelet hint chain decides;
// otherwise the backend with more rules (iptables and ip6tables together);
// with no rules anywhere, BackendDefault. It only reads (legacy's save
// lists the tables that already exist and creates none). reason says why,
// for the log.
func DetectBackend(ctx context.Context, command CommandFunc) (b Backend, reason string) {
	if command == nil {
		command = exec.CommandContext
	}
	save := func(bin string) (string, bool) {
		out, err := command(ctx, bin).Output()
		return string(out), err == nil
	}
	count := map[Backend]int{}
	usable := map[Backend]bool{}
	for _, be := range []Backend{BackendLegacy, BackendNFT} {
		for _, f := range []Family{IPv4, IPv6} {
			bin, _ := be.Binaries(f)
			out, ok := save(bin)
			if !ok {
				continue
			}
			usable[be] = true
			for _, hint := range kubeHints {
				if strings.Contains(out, hint) {
					return be, fmt.Sprintf("%s has kubelet's %s chain", bin, hint[1:])
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "-A ") {
					count[be]++
				}
			}
		}
	}
	switch {
	case count[BackendLegacy] > count[BackendNFT]:
		return BackendLegacy, fmt.Sprintf("iptables-legacy holds %d rules, iptables-nft %d", count[BackendLegacy], count[BackendNFT])
	case count[BackendNFT] > count[BackendLegacy]:
		return BackendNFT, fmt.Sprintf("iptables-nft holds %d rules, iptables-legacy %d", count[BackendNFT], count[BackendLegacy])
	case !usable[BackendLegacy] && !usable[BackendNFT]:
		return BackendDefault, "neither iptables-legacy-save nor iptables-nft-save runs; using iptables-save"
	}
	return BackendDefault, "no existing rules in either backend; using the system's iptables"
}
