#!/usr/bin/env bash
# Builds one command of the istio.io/istio Go module in a throwaway module
# outside Strait's go.mod (istio.io/istio never enters the main module):
#
#   hack/istio-build.sh NAME PACKAGE      e.g. pilot-agent istio.io/istio/pilot/cmd/pilot-agent
#
# Cached by version, static (CGO_ENABLED=0):
#
#   $STRAIT_ISTIO_CACHE/<version>/bin/NAME
#
# STRAIT_ISTIO_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/strait/istio.
# A second run with the binary present returns at once. Concurrent builds
# in one cache are serialised with flock. Prints the binary's path on the
# last line of stdout; progress goes to stderr.
set -euo pipefail

NAME="${1:?usage: istio-build.sh NAME PACKAGE}"
PKG="${2:?usage: istio-build.sh NAME PACKAGE}"
ISTIO_VERSION="${STRAIT_ISTIO_VERSION:-v0.0.0-20260827124520-eed52ebb66ad}"
GO="${GO:-go}"
CACHE="${STRAIT_ISTIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strait/istio}"
ROOT="$CACHE/$ISTIO_VERSION"
BIN="$ROOT/bin"

log() { echo "$NAME-build: $(date +%T) $*" >&2; }

# A cached binary needs no lock (another build in the same cache may hold
# it for minutes).
if [[ -x "$BIN/$NAME" ]]; then
	echo "$BIN/$NAME"
	exit 0
fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
if ! flock -n 9; then
	log "another build holds $ROOT/.lock; waiting for it"
	flock 9
fi

if [[ -x "$BIN/$NAME" ]]; then
	log "cached: $BIN/$NAME"
	echo "$BIN/$NAME"
	exit 0
fi

mkdir -p "$BIN"
# Never inherit the caller's module settings (e.g. -mod=vendor, a go.work).
export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0

dir="$ROOT/src-$NAME"
start=$SECONDS
rm -rf "$dir" && mkdir -p "$dir"
log "fetching istio.io/istio@$ISTIO_VERSION"
gomod=$(cd "$dir" && "$GO" mod download -json "istio.io/istio@$ISTIO_VERSION" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$gomod" ]] || { log "cannot download istio.io/istio@$ISTIO_VERSION"; exit 1; }
goline=$(sed -n 's/^go \(.*\)$/\1/p' "$gomod" | head -1)
log "istio's go.mod says go $goline; local: $("$GO" env GOVERSION)"
# Istio tracks new Go releases; if its go line is newer than the local
# toolchain, let the go command fetch a newer one (this script only).
if [[ "$(printf '%s\n%s\n' "$goline" "$("$GO" env GOVERSION | sed 's/^go//')" | sort -V | tail -1)" != "$("$GO" env GOVERSION | sed 's/^go//')" ]]; then
	export GOTOOLCHAIN="${STRAIT_ISTIO_GOTOOLCHAIN:-go1.27.3}"
	log "using GOTOOLCHAIN=$GOTOOLCHAIN"
fi
{
	echo "module strait.local/istio/$NAME"
	echo
	echo "go $goline"
	echo
	echo "require istio.io/istio $ISTIO_VERSION"
	echo
	# Istio's own replace directives (single-line and block form), if any.
	awk '
		/^replace[[:space:]]*\($/ {blk=1; print "replace ("; next}
		blk && /^\)/ {blk=0; print ")"; next}
		blk {print; next}
		/^replace[[:space:]]/ {print}
	' "$gomod" | grep -v '=> \.' || true
} >"$dir/go.mod"
cat >"$dir/tools.go" <<GO
//go:build tools

package tools

import _ "$PKG"
GO
log "resolving modules for $PKG"
(cd "$dir" && "$GO" get "$PKG@$ISTIO_VERSION" >&2)
log "modules resolved in $((SECONDS - start))s; building $NAME (minutes on 2 cores)"
(cd "$dir" && "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/$NAME.tmp" "$PKG")
mv "$BIN/$NAME.tmp" "$BIN/$NAME"
echo "$ISTIO_VERSION" >"$ROOT/VERSION"
log "built in $((SECONDS - start))s: $BIN/$NAME"
echo "$BIN/$NAME"
