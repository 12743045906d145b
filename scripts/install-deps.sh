#!/bin/sh
# Installs the Debian packages that the demo and the tests use, when they are
# missing. Runs as root on a fresh Debian machine; does nothing when all is there.
set -eu

need=""
command -v iptables >/dev/null 2>&1 || need="$need iptables"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
command -v nsenter >/dev/null 2>&1 || need="$need util-linux"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx-light"
command -v curl >/dev/null 2>&1 || need="$need curl" # h2c checks: curl --http2-prior-knowledge

if [ -n "$need" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing packages:$need (run as root, or install them with apt-get)" >&2
		exit 1
	fi
	echo "install-deps: installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || apt-get update
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $need
fi
