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
command -v chromium >/dev/null 2>&1 || need="$need chromium" # TestMeshPage: straitd's mesh page in headless Chromium
# The one-node Kubernetes tests (internal/kubenode): the container runtime
# the kubelet drives, its OCI runtime, and the CNI bridge/host-local/loopback
# plugins. Debian bookworm's containerd 1.6 speaks CRI v1, which kubelet
# v1.37 accepts (it falls back from the RuntimeConfig call that containerd 2
# adds). The package's systemd unit is never started: the tests run their own
# containerd with its own socket and directories.
command -v containerd >/dev/null 2>&1 || need="$need containerd"
command -v runc >/dev/null 2>&1 || need="$need runc"
[ -x /usr/lib/cni/bridge ] || need="$need containernetworking-plugins"
command -v nft >/dev/null 2>&1 || need="$need nftables" # kube-proxy's nftables mode
[ -s /etc/ssl/certs/ca-certificates.crt ] || need="$need ca-certificates" # file-root:system, the host's trust bundle
# A real Prometheus scrapes a local mesh (test/e2e/prometheus_test.go,
# straitctl local up --prometheus): the binary only, run by the tests with
# their own config and storage on loopback.
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need="$need prometheus"

if [ -n "$need" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing packages:$need (run as root, or install them with apt-get)" >&2
		exit 1
	fi
	echo "install-deps: installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || apt-get update
	# No package's service is started (Debian's prometheus would take
	# :9090, containerd its socket): policy-rc.d refuses them while apt
	# installs, unless the machine has its own policy.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $need
fi
