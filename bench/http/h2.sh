#!/usr/bin/env bash
# bench/http/h2.sh: HTTP/2 (h2c, prior knowledge) data-plane benchmark on
# loopback, h2load against two-hop chains:
#   nginx         h2load -h2c-> nginx -h1-> nginx -> backend
#   strait        h2load -h2c-> strait-proxy -h1-> strait-proxy -> backend
#   strait-h2up   h2load -h2c-> strait-proxy -h2c-> strait-proxy -> backend
#                 (the mesh's shape for an HTTP2/gRPC port: sidecar to
#                 sidecar in HTTP/2; nginx cannot proxy_pass HTTP/2)
# Every proxy has one worker (--concurrency 1); the backend is nginx with a
# fixed 1 KiB body. Runs are interleaved; figures are medians over RUNS.
#
# Environment: RUNS=3 DURATION=10 (seconds) CONNS=16 STREAMS=10 (per
# connection) CHAINS="nginx strait strait-h2up" (also strait-base and
# strait-h2up-base: the same with BASE_BIN, another build in the same run)
# STRAIT_BIN=path BASE_BIN=path PORT_BASE=18300 (ports used start above it)
# STRAIT_FLAGS="--cpu-profile /tmp/h2-{name}.pprof" (extra flags of every
# strait-proxy; {name} becomes the proxy's name, e.g. strait-h2up-1 for hop 1)
# README=path (default bench/http/README.md; "-" = don't write)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-10}
CHAINS=${CHAINS:-"nginx strait strait-h2up"}
README=${README:-$here/README.md}
STRAIT_FLAGS=${STRAIT_FLAGS:-}
BENCH_NAME=bench-h2
# shellcheck source=lib.sh
. "$here/lib.sh"

need=()
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

bench_workdir strait-bench-h2

build_strait_proxy

next_port=${PORT_BASE:-18300}

body=$(head -c 1024 /dev/zero | tr '\0' 'x')
nginx_conf() { # name listen-port listen-flags [upstream-port]
	local d="$work/$1"; mkdir -p "$d/logs"
	local loc
	if [ -n "${4:-}" ]; then
		loc="location / { proxy_pass http://next; proxy_http_version 1.1; proxy_set_header Connection \"\"; }"
	else
		loc="location / { default_type text/plain; return 200 \"$body\"; }"
	fi
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
	$( [ -n "${4:-}" ] && echo "upstream next { server 127.0.0.1:$4; keepalive 64; keepalive_requests 1000000; }" )
	server { listen 127.0.0.1:$2 $3; $loc }
}
CONF
	start "$1" "$NGINX" -p "$d" -c "$d/nginx.conf"
}

strait_conf() { # name listen-port upstream-port admin-port upstream-h2(0|1) [binary]
	local h2="" bin=${6:-$STRAIT_BIN}
	[ "$5" = 1 ] && h2='
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}'
	cat >"$work/$1.yaml" <<CONF
node: {id: bench, cluster: bench}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $4}}
static_resources:
  clusters:
  - name: next
    type: STATIC
    connect_timeout: 2s$h2
    load_assignment:
      cluster_name: next
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $3}}}}]}]
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: $2}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
          http2_protocol_options: {max_concurrent_streams: 1000}
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: next}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
CONF
	# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
	start "$1" "$bin" -c "$work/$1.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/$1}
}

declare -A entry proxies
newport be_port
nginx_conf backend "$be_port" ""
wait_port "$be_port" "$started"
chains=()
for c in $CHAINS; do
	newport p2; newport p1; newport a2; newport a1
	case $c in
	nginx)
		nginx_conf nginx2 "$p2" "" "$be_port"; a=$started; wait_port "$p2" "$a"
		nginx_conf nginx1 "$p1" http2 "$p2"; b=$started; wait_port "$p1" "$b" ;;
	strait | strait-h2up | strait-base | strait-h2up-base)
		up=0; [ "${c%-base}" = strait-h2up ] && up=1
		bin=$STRAIT_BIN; [ "${c%-base}" != "$c" ] && bin=${BASE_BIN:?BASE_BIN is the binary of $c}
		strait_conf "$c-2" "$p2" "$be_port" "$a2" 0 "$bin"; a=$started; wait_port "$p2" "$a"
		strait_conf "$c-1" "$p1" "$p2" "$a1" "$up" "$bin"; b=$started; wait_port "$p1" "$b" ;;
	*) log "unknown chain $c"; exit 2 ;;
	esac
	entry[$c]=$p1; proxies[$c]="$b $a"; chains+=("$c")
done
for c in "${chains[@]}"; do
	n=$(curl -sf --http2-prior-knowledge "http://127.0.0.1:${entry[$c]}/" | wc -c) || n=0
	if [ "$n" != 1024 ]; then log "chain $c returned $n bytes over h2c, want 1024"; exit 1; fi
done

hz=$(getconf CLK_TCK)
results=$work/results.tsv
: >"$results"
run_h2load() { # out duration url (per-request latencies in out.log)
	h2load -D "$2" -c "$CONNS" -m "$STREAMS" -t 1 --log-file="$1.log" "$3" >"$1" 2>&1 &
	local w=$!
	pids+=("$w")
	wait "$w" || true
	unset 'pids[-1]'
}
loads=()
log "chains: ${chains[*]}; $RUNS runs of h2load -D $DURATION -c $CONNS -m $STREAMS, interleaved"
for c in "${chains[@]}"; do run_h2load "$work/warm.txt" 2 "http://127.0.0.1:${entry[$c]}/"; done
for run in $(seq "$RUNS"); do
	for c in "${chains[@]}"; do
		read -r -a pp <<<"${proxies[$c]}"
		before=(); for p in "${pp[@]}"; do before+=("$(cpu_ticks "$p")"); done
		run_h2load "$work/out.txt" "$DURATION" "http://127.0.0.1:${entry[$c]}/"
		after=(); for p in "${pp[@]}"; do after+=("$(cpu_ticks "$p")"); done
		rps=$(awk '/^finished in/ { print $4 }' "$work/out.txt")
		done_n=$(awk '/^requests:/ { print $8 }' "$work/out.txt")
		failed=$(awk '/^requests:/ { print $10 + $12 }' "$work/out.txt")
		[ "${failed:-0}" != 0 ] && log "$c: $failed failed or errored requests"
		p99=$(awk -F'\t' '{ print $3 / 1000 }' "$work/out.txt.log" | sort -g | awk '{ a[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.3f", a[i] }')
		cpus=()
		for i in "${!pp[@]}"; do
			cpus+=("$(awk -v d=$((after[i] - before[i])) -v hz="$hz" -v n="$done_n" 'BEGIN { printf "%.4f", d / hz / (n / 1000) }')")
		done
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$rps" "${cpus[0]}" "${cpus[1]}" "$p99" >>"$results"
		loads+=("$(cut -d' ' -f1 /proc/loadavg)")
		log "run $run $c: $rps req/s, p99 $p99 ms, cpu/1k req ${cpus[*]}"
	done
done

col() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$results"; }
nginx_rps=""; nginx_core=""
if [ -n "${entry[nginx]:-}" ]; then
	nginx_rps=$(col nginx 3 | median)
	nginx_core=$(awk -v a="$(col nginx 4 | median)" -v b="$(col nginx 5 | median)" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
fi
table=$work/table.md
{
	echo "| chain | req/s (median) | × nginx | p99 ms | CPU s / 1000 req (hop 1, hop 2) | req/s per core per proxy | × nginx | peak RSS MiB (hop 1, hop 2) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for c in "${chains[@]}"; do
		rps=$(col "$c" 3 | median)
		c1=$(col "$c" 4 | median); c2=$(col "$c" 5 | median)
		core=$(awk -v a="$c1" -v b="$c2" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
		ratio=-; core_ratio=-
		[ -n "$nginx_rps" ] && ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.2f", a / b }')
		[ -n "$nginx_core" ] && core_ratio=$(awk -v a="$core" -v b="$nginx_core" 'BEGIN { printf "%.2f", a / b }')
		read -r -a pp <<<"${proxies[$c]}"
		printf '| %s | %.0f | %s | %s | %s, %s | %s | %s | %s, %s |\n' "$c" "$rps" "$ratio" "$(col "$c" 6 | median)" "$c1" "$c2" "$core" "$core_ratio" "$(hwm "${pp[0]}")" "$(hwm "${pp[1]}")"
	done
} >"$table"
stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
loadavg="1-min load average after each run: ${loads[*]}"
echo "$stamp, $(nproc) cores, $RUNS runs of h2load -D $DURATION -c $CONNS -m $STREAMS, 1 KiB body, loopback; $loadavg"
cat "$table"
if [ "$README" != "-" ] && [ -f "$README" ] && grep -q '<!-- h2results:start -->' "$README"; then
	block=$work/block.md
	{
		echo "<!-- h2results:start -->"
		echo "Last run: $stamp, $(nproc) cores, $RUNS runs of \`h2load -D $DURATION -c $CONNS -m $STREAMS\` per chain (medians), 1 KiB body, loopback; $loadavg."
		echo
		cat "$table"
		echo "<!-- h2results:end -->"
	} >"$block"
	replace_block "$README" "h2results" "$block"
	log "table written to $README"
fi
