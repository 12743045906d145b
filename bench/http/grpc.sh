#!/usr/bin/env bash
# bench/http/grpc.sh: gRPC (unary) data-plane benchmark on loopback,
# bench/grpcload's client against two-hop chains in front of its server
# (a grpc-go server, internal/proxy/grpctest's Echo):
#   nginx    grpcload -h2c-> nginx -grpc_pass-> nginx -grpc_pass-> server
#   strait   grpcload -h2c-> strait-proxy -h2c-> strait-proxy -h2c-> server
#            (clusters with http2_protocol_options, as straitd makes them
#            for a GRPC port: sidecar to sidecar in HTTP/2)
#   strait-mtls  the same with mutual TLS 1.3 between the two proxies, with
#            the TLS contexts straitd writes for sidecars (Istio's ALPN,
#            SPIFFE URI SAN matcher, client certificate required), from
#            files instead of SDS: issue #24's mTLS goal against strait
# Every proxy has one worker (--concurrency 1) and keep-alive upstream
# connections. Runs are interleaved; figures are medians over RUNS. CPU per
# request is utime+stime of each proxy process around each run.
#
# Environment: RUNS=3 DURATION=10s CONNS=2 (client HTTP/2 connections)
# CONCURRENCY=16 (calls in flight) SIZE=100 (request bytes)
# CHAINS="nginx strait" (also strait-mtls, and strait-base: the same as
# strait with BASE_BIN, another build in the same run) STRAIT_BIN=path BASE_BIN=path PORT_BASE=18700
# STRAIT_FLAGS="--cpu-profile /tmp/grpc-{name}.pprof" (extra flags of every
# strait-proxy; {name} becomes the proxy's name, strait1 for hop 1)
# README=path (default bench/http/README.md; "-" = don't write)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-2}
CONCURRENCY=${CONCURRENCY:-16}
SIZE=${SIZE:-100}
CHAINS=${CHAINS:-"nginx strait"}
README=${README:-$here/README.md}
STRAIT_FLAGS=${STRAIT_FLAGS:-}
BENCH_NAME=bench-grpc
# shellcheck source=lib.sh
. "$here/lib.sh"

# nginx's gRPC proxy module (ngx_http_grpc_module) is built into Debian's
# nginx-light, nginx-full and nginx-extras alike.
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
	log "installing nginx-light"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q nginx-light >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nginx-light >/dev/null; }
}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if "$NGINX" -V 2>&1 | grep -q -- --without-http_grpc_module; then
	log "$NGINX was built without the gRPC module: install nginx-full"; exit 1
fi

bench_workdir strait-bench-grpc

build_strait_proxy
(cd "$root" && go build -o "$work/grpcload" ./bench/grpcload)

next_port=${PORT_BASE:-18700}

nginx_conf() { # name listen-port upstream-port
	local d="$work/$1"; mkdir -p "$d/logs"
	cat >"$d/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/logs/error.log error;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	http2_max_concurrent_streams 1000;
	upstream next { server 127.0.0.1:$3; keepalive 64; keepalive_requests 1000000; }
	server { listen 127.0.0.1:$2 http2; location / { grpc_pass grpc://next; } }
}
CONF
	start "$1" "$NGINX" -p "$d" -c "$d/nginx.conf"
}

strait_conf() { # name listen-port upstream-port admin-port [binary]
	local bin=${5:-$STRAIT_BIN}
	cat >"$work/$1.yaml" <<CONF
node: {id: bench, cluster: bench}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $4}}
static_resources:
  clusters:
  - name: next
    type: STATIC
    connect_timeout: 2s
$cluster_tls
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: next
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $3}}}}]}]
  listeners:
  - name: grpc
    address: {socket_address: {address: 127.0.0.1, port_value: $2}}
    filter_chains:
    - $chain_tls
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: grpc
          http2_protocol_options: {max_concurrent_streams: 1000}
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: next}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
CONF
	# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
	start "$1" "$bin" -c "$work/$1.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/$1}
}

cluster_tls="" # the YAML of the cluster's upstream TLS (strait-mtls's hop 1)
chain_tls=""   # the filter chain's downstream TLS (strait-mtls's hop 2)
declare -A entry proxies
newport be_port
start server "$work/grpcload" -serve "127.0.0.1:$be_port"
wait_port "$be_port" "$started"
chains=()
for c in $CHAINS; do
	newport p2; newport p1; newport a2; newport a1
	case $c in
	nginx)
		nginx_conf nginx2 "$p2" "$be_port"; a=$started; wait_port "$p2" "$a"
		nginx_conf nginx1 "$p1" "$p2"; b=$started; wait_port "$p1" "$b" ;;
	strait)
		strait_conf strait2 "$p2" "$be_port" "$a2"; a=$started; wait_port "$p2" "$a"
		strait_conf strait1 "$p1" "$p2" "$a1"; b=$started; wait_port "$p1" "$b" ;;
	strait-mtls)
		mkcerts
		chain_tls="transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, require_client_certificate: true, common_tls_context: $(tls_common server client h2 http/1.1)}}"
		strait_conf strait-mtls2 "$p2" "$be_port" "$a2"; a=$started; wait_port "$p2" "$a"
		chain_tls=""
		# Istio's ALPN for an HTTP/2 cluster in the mesh (ALPNInMeshH2).
		cluster_tls="    transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: server, common_tls_context: $(tls_common client server istio h2)}}"
		strait_conf strait-mtls1 "$p1" "$p2" "$a1"; b=$started; wait_port "$p1" "$b"
		cluster_tls="" ;;
	strait-base)
		strait_conf strait-base2 "$p2" "$be_port" "$a2" "${BASE_BIN:?BASE_BIN is the binary of strait-base}"; a=$started; wait_port "$p2" "$a"
		strait_conf strait-base1 "$p1" "$p2" "$a1" "$BASE_BIN"; b=$started; wait_port "$p1" "$b" ;;
	*) log "unknown chain $c"; exit 2 ;;
	esac
	entry[$c]=$p1; proxies[$c]="$b $a"; chains+=("$c")
done

hz=$(getconf CLK_TCK)
results=$work/results.tsv # chain run rps p50 p99 cpu1 cpu2
: >"$results"
loads=()
run_load() { # out duration port
	"$work/grpcload" -addr "127.0.0.1:$3" -conns "$CONNS" -concurrency "$CONCURRENCY" -size "$SIZE" -duration "$2" >"$1" 2>&1 &
	local w=$!
	pids+=("$w")
	local rc=0
	wait "$w" || rc=$?
	unset 'pids[-1]'
	if [ $rc != 0 ]; then log "grpcload against port $3 failed:"; cat "$1" >&2; return 1; fi
}
kv() { tr ' ' '\n' <"$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; } # key file
log "chains: ${chains[*]}; $RUNS runs of grpcload -conns $CONNS -concurrency $CONCURRENCY -size $SIZE -duration $DURATION, interleaved"
for c in "${chains[@]}"; do run_load "$work/warm.txt" 2s "${entry[$c]}"; done
for run in $(seq "$RUNS"); do
	for c in "${chains[@]}"; do
		read -r -a pp <<<"${proxies[$c]}"
		before=(); for p in "${pp[@]}"; do before+=("$(cpu_ticks "$p")"); done
		run_load "$work/out.txt" "$DURATION" "${entry[$c]}"
		after=(); for p in "${pp[@]}"; do after+=("$(cpu_ticks "$p")"); done
		loads+=("$(cut -d' ' -f1 /proc/loadavg)")
		n=$(kv requests "$work/out.txt")
		cpus=()
		for i in "${!pp[@]}"; do
			cpus+=("$(awk -v d=$((after[i] - before[i])) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.4f", d / hz / (n / 1000) }')")
		done
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$(kv rps "$work/out.txt")" "$(kv p50_ms "$work/out.txt")" "$(kv p99_ms "$work/out.txt")" "${cpus[0]}" "${cpus[1]}" >>"$results"
		log "run $run $c: $(cat "$work/out.txt"), cpu/1k req ${cpus[*]}"
	done
done

col() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$results"; }
nginx_rps=""; nginx_core=""
if [ -n "${entry[nginx]:-}" ]; then
	nginx_rps=$(col nginx 3 | median)
	nginx_core=$(awk -v a="$(col nginx 6 | median)" -v b="$(col nginx 7 | median)" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
fi
table=$work/table.md
{
	echo "| chain | req/s (median) | × nginx | p50 ms | p99 ms | CPU s / 1000 req (hop 1, hop 2) | req/s per core per proxy | × nginx | peak RSS MiB (hop 1, hop 2) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for c in "${chains[@]}"; do
		rps=$(col "$c" 3 | median)
		c1=$(col "$c" 6 | median); c2=$(col "$c" 7 | median)
		core=$(awk -v a="$c1" -v b="$c2" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
		ratio=-; core_ratio=-
		[ -n "$nginx_rps" ] && ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.2f", a / b }')
		[ -n "$nginx_core" ] && core_ratio=$(awk -v a="$core" -v b="$nginx_core" 'BEGIN { printf "%.2f", a / b }')
		read -r -a pp <<<"${proxies[$c]}"
		printf '| %s | %.0f | %s | %s | %s | %s, %s | %s | %s | %s, %s |\n' "$c" "$rps" "$ratio" "$(col "$c" 4 | median)" "$(col "$c" 5 | median)" "$c1" "$c2" "$core" "$core_ratio" "$(hwm "${pp[0]}")" "$(hwm "${pp[1]}")"
	done
} >"$table"
stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
what="$RUNS runs of \`grpcload -conns $CONNS -concurrency $CONCURRENCY -size $SIZE -duration $DURATION\` per chain (medians), unary Echo, loopback"
loadavg="1-min load average after each run: ${loads[*]}"
echo "$stamp, $(nproc) cores, $what; $loadavg"
cat "$table"
if [ "$README" != "-" ] && [ -f "$README" ] && grep -q '<!-- grpcresults:start -->' "$README"; then
	block=$work/block.md
	{
		echo "<!-- grpcresults:start -->"
		echo "Last run: $stamp, $(nproc) cores, $what; $loadavg."
		echo
		cat "$table"
		echo "<!-- grpcresults:end -->"
	} >"$block"
	replace_block "$README" "grpcresults" "$block"
	log "table written to $README"
fi
