#!/usr/bin/env bash
# Builds the Kubernetes binaries that the kube tests run (internal/kubeapiserver
# for the API server alone, internal/kubenode for a one-node cluster), from
# their Go modules, in throwaway modules outside the main module (so
# k8s.io/kubernetes never enters Strait's go.mod). The result is cached by
# version:
#
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kube-apiserver
#   $STRAIT_KUBE_CACHE/<kube version>/bin/etcd
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kube-node   (one multi-call binary)
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kubelet -> kube-node
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kube-controller-manager -> kube-node
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kube-scheduler -> kube-node
#   $STRAIT_KUBE_CACHE/<kube version>/bin/kube-proxy -> kube-node
#
# kube-node holds the kubelet, the controller manager, the scheduler and
# kube-proxy in
# one executable that picks its command by the name it was started under
# (as the old hyperkube did): the three share most of their packages, so
# one link instead of three saves minutes and ~200 MB on a 2-core machine.
#
# STRAIT_KUBE_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/strait/kube.
# A second run with the binaries present returns at once. Concurrent runs are
# serialised with flock. Prints the bin directory on the last line of stdout.
set -euo pipefail

KUBE_VERSION="${STRAIT_KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${STRAIT_ETCD_VERSION:-v3.7.3}"
GO="${GO:-go}"
CACHE="${STRAIT_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strait/kube}"
ROOT="$CACHE/$KUBE_VERSION"
BIN="$ROOT/bin"
# Staging modules are published as v0.<minor>.<patch> for v1.<minor>.<patch>.
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

log() { echo "kube-testenv-build: $*" >&2; }

mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
if ! flock -n 9; then
	log "another build holds $ROOT/.lock; waiting for it"
	flock 9
fi

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/etcd" && -x "$BIN/kube-node" ]]; then
	log "cached: $BIN"
	echo "$BIN"
	exit 0
fi

mkdir -p "$BIN"
# Never inherit the caller's module settings (e.g. -mod=vendor, a go.work).
export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0
# The throwaway modules need the network only for `go mod download`; later
# builds reuse the module cache.

# write_kube_gomod DIR NAME writes DIR/go.mod for a throwaway module that
# requires k8s.io/kubernetes with its staging modules replaced by their
# published releases.
write_kube_gomod() {
	local dir=$1 name=$2
	rm -rf "$dir" && mkdir -p "$dir"
	log "fetching k8s.io/kubernetes@$KUBE_VERSION"
	local gomod
	gomod=$(cd "$dir" && "$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[[ -f "$gomod" ]] || { log "cannot download k8s.io/kubernetes@$KUBE_VERSION"; return 1; }
	{
		echo "module strait.local/kubetestenv/$name"
		echo
		sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -1
		echo
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		echo
		echo "replace ("
		# Every k8s.io/* staging module → its published release.
		sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*$#\t\1 => \1 '"$STAGING_VERSION"'#p' "$gomod"
		echo ")"
	} >"$dir/go.mod"
}

# kube_ldflags prints the -ldflags that stamp the Kubernetes version (the
# kubelet reports it on its Node; the API server checks skew against it).
kube_ldflags() {
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	local pkg=k8s.io/component-base/version
	echo "-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
}

build_apiserver() {
	local dir="$ROOT/apiserver-src"
	local start=$SECONDS
	write_kube_gomod "$dir" apiserver
	log "resolving modules for kube-apiserver"
	(cd "$dir" && "$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" >&2)
	log "building kube-apiserver $KUBE_VERSION (takes several minutes on 2 cores)"
	(cd "$dir" && "$GO" build -trimpath -o "$BIN/kube-apiserver.tmp" -ldflags "$(kube_ldflags)" \
		k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
	log "kube-apiserver built in $((SECONDS - start))s"
}

build_etcd() {
	local dir="$ROOT/etcd-src"
	local start=$SECONDS
	rm -rf "$dir" && mkdir -p "$dir"
	cat >"$dir/go.mod" <<MOD
module strait.local/kubetestenv/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
	cat >"$dir/main.go" <<'GO'
// Command etcd is etcd's own main, etcdmain.Main, for the Strait test env.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	log "resolving modules for etcd $ETCD_VERSION"
	(cd "$dir" && "$GO" mod tidy >&2)
	log "building etcd $ETCD_VERSION"
	(cd "$dir" && "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .)
	mv "$BIN/etcd.tmp" "$BIN/etcd"
	log "etcd built in $((SECONDS - start))s"
}

build_node() {
	local dir="$ROOT/node-src"
	local start=$SECONDS
	write_kube_gomod "$dir" node
	cat >"$dir/main.go" <<'GO'
// Command kube-node is the kubelet, kube-controller-manager, kube-scheduler
// and kube-proxy in one executable for the Strait kube tests: it runs the
// command named by the name it was started under (a symlink), or by its
// first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	_ "time/tzdata"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kube-proxy":              proxy.NewProxyCommand,
	}
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "kube-node: run as kubelet, kube-controller-manager, kube-scheduler or kube-proxy (a symlink, or the first argument)")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
GO
	log "resolving modules for kubelet, kube-controller-manager, kube-scheduler, kube-proxy"
	(cd "$dir" && "$GO" get "k8s.io/kubernetes/cmd/kubelet@$KUBE_VERSION" && "$GO" mod tidy >&2)
	log "building kube-node (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) $KUBE_VERSION (takes several minutes on 2 cores)"
	(cd "$dir" && "$GO" build -trimpath -o "$BIN/kube-node.tmp" -ldflags "$(kube_ldflags)" .)
	mv "$BIN/kube-node.tmp" "$BIN/kube-node"
	local cmd
	for cmd in kubelet kube-controller-manager kube-scheduler kube-proxy; do
		ln -sfn kube-node "$BIN/$cmd"
	done
	log "kube-node built in $((SECONDS - start))s"
}

[[ -x "$BIN/etcd" ]] || build_etcd
[[ -x "$BIN/kube-apiserver" ]] || build_apiserver
[[ -x "$BIN/kube-node" ]] || build_node
echo "$KUBE_VERSION etcd=$ETCD_VERSION" >"$ROOT/VERSION"
log "done: $BIN"
echo "$BIN"
