#!/usr/bin/env bash
# bench/http/idle.sh: memory held by idle HTTP/1.1 keep-alive connections.
#
# For each proxy (one hop, one worker / --concurrency 1, keep-alive to the
# same backend as run.sh: nginx with a fixed 1 KiB body), bench/idleconns
# opens CONNS connections, sends one GET on each (at most 64 at once, so the
# proxy needs few upstream connections), holds them idle and reads the
# proxy's VmRSS before and after. Every run starts fresh proxy processes;
# runs are interleaved and figures are medians over RUNS.
#
# MODE=h2 measures idle HTTP/2 connections instead: h2c with prior
# knowledge, one GET on stream 1 each (nginx: listen ... http2).
#
# MODE=slowheads (bench/http/slowheads.sh) measures slow request heads
# instead: every connection trickles a HEAD_BYTES head over TRICKLE and
# never ends it; the table has each proxy's VmRSS while it holds them and
# its peak (VmHWM). Both proxies run with what their defaults do to such a
# head: strait-proxy has Envoy's (no request_headers_timeout, stream idle
# 5 min, 60 KiB / 100 headers), nginx has client_header_timeout 300s and
# large_client_header_buffers 8 8k so that it holds the head too (its
# default, 4 8k, refuses a 59 KB head with 400).
#
# Environment: RUNS=3 CONNS=10000 CHAINS="nginx strait" STRAIT_BIN=path PORT_BASE=18500
# (chain strait-base: STRAIT_BASE_BIN, another build, e.g. main's, to compare)
# README=path (default bench/http/README.md; "-" = don't write)
# MODE=idle|h2|slowheads HEAD_BYTES=59000 TRICKLE=20s
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-3}
CONNS=${CONNS:-10000}
CHAINS=${CHAINS:-"nginx strait"}
README=${README:-$here/README.md}
MODE=${MODE:-idle}
HEAD_BYTES=${HEAD_BYTES:-59000}
TRICKLE=${TRICKLE:-20s}
case $MODE in
idle) marker=idleresults ;;
h2) marker=h2idleresults ;;
slowheads) marker=slowheadsresults ;;
*) echo "bench-idle: MODE=$MODE: want idle, h2 or slowheads" >&2; exit 2 ;;
esac
BENCH_NAME=bench-idle
# shellcheck source=lib.sh
. "$here/lib.sh"

command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
	log "installing nginx-light"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q nginx-light >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nginx-light >/dev/null; }
}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
# Room for CONNS client sockets, the proxies' CONNS accepted ones and their
# upstream connections (children inherit the limit).
ulimit -n $((CONNS * 2 + 4096)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

bench_workdir strait-bench-idle

build_strait_proxy
(cd "$root" && go build -o "$work/idleconns" ./bench/idleconns)

next_port=${PORT_BASE:-18500}
stop() { # pid: stop one proxy and forget it
	kill "$1" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=()
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	pids=(${keep[@]+"${keep[@]}"})
}

body=$(head -c 1024 /dev/zero | tr '\0' 'x')
nginx_conf() { # name listen-port [upstream-port]
	local d="$work/$1"; mkdir -p "$d/logs"
	local loc
	if [ -n "${3:-}" ]; then
		loc="location / { proxy_pass http://next; proxy_http_version 1.1; proxy_set_header Connection \"\"; }"
	else
		loc="location / { default_type text/plain; return 200 \"$body\"; }"
	fi
	cat >"$d/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile $((CONNS * 2 + 4096));
pid $d/nginx.pid;
error_log $d/logs/error.log error;
events { worker_connections $((CONNS * 2 + 1024)); }
http {
	access_log off;
	$( [ "$MODE" = slowheads ] && echo "client_header_timeout 300s; large_client_header_buffers 8 8k;" )
	keepalive_requests 1000000;
	keepalive_timeout 3600s;
	$( [ -n "${3:-}" ] && echo "upstream next { server 127.0.0.1:$3; keepalive 64; keepalive_requests 1000000; }" )
	server { listen 127.0.0.1:$2 reuseport$( [ "$MODE" = h2 ] && [ -n "${3:-}" ] && echo " http2"); $loc }
}
CONF
	start "$1" "$NGINX" -p "$d" -c "$d/nginx.conf"
}
strait_conf() { # name listen-port upstream-port admin-port [binary]
	cat >"$work/$1.yaml" <<CONF
node: {id: bench, cluster: bench}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $4}}
static_resources:
  clusters:
  - name: next
    type: STATIC
    connect_timeout: 2s
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
          stat_prefix: http$( [ "$MODE" = h2 ] && printf '\n          http2_protocol_options: {}')
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: next}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
CONF
	start "$1" "${5:-$STRAIT_BIN}" -c "$work/$1.yaml" --concurrency 1 --log-level error
}

newport be_port
nginx_conf backend "$be_port"
wait_port "$be_port" "$started"

results=$work/results.tsv # chain run rss_before_kib rss_after_kib kib_per_conn rss_peak_kib
: >"$results"
loads=()
what="idle connections"
slow=()
curl_h2=()
if [ "$MODE" = h2 ]; then
	what="idle HTTP/2 connections (h2c)"
	slow=(-h2)
	curl_h2=(--http2-prior-knowledge)
fi
if [ "$MODE" = slowheads ]; then
	what="connections trickling a $HEAD_BYTES-byte head over $TRICKLE"
	slow=(-slow-head-bytes "$HEAD_BYTES" -trickle "$TRICKLE")
fi
log "chains: $CHAINS; $RUNS runs of $CONNS $what each, interleaved"
kv() { sed -nE "s/^(.* )?$1=([^ ]+).*/\2/p" <<<"$out"; }
for run in $(seq "$RUNS"); do
	for c in $CHAINS; do
		newport p; newport a
		case $c in
		nginx) nginx_conf "nginx-$run" "$p" "$be_port" ;;
		strait) strait_conf "strait-$run" "$p" "$be_port" "$a" ;;
		strait-base) strait_conf "strait-base-$run" "$p" "$be_port" "$a" "$STRAIT_BASE_BIN" ;;
		*) log "unknown chain $c"; exit 2 ;;
		esac
		pid=$started
		wait_port "$p" "$pid"
		n=$(curl -sf ${curl_h2[@]+"${curl_h2[@]}"} "http://127.0.0.1:$p/" | wc -c) || n=0
		if [ "$n" != 1024 ]; then log "$c returned $n bytes, want 1024"; exit 1; fi
		out=$("$work/idleconns" -addr "127.0.0.1:$p" -n "$CONNS" -pid "$pid" ${slow[@]+"${slow[@]}"})
		loads+=("$(cut -d' ' -f1 /proc/loadavg)")
		log "run $run $c: $out"
		after=$(kv rss_after_kib)
		[ -n "$after" ] || after=$(kv rss_held_kib)
		peak=$(kv rss_peak_kib)
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$(kv rss_before_kib)" "$after" "$(kv kib_per_conn)" "${peak:--}" >>"$results"
		stop "$pid"
	done
done

col() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$results"; }
n_after=""; n_per=""
if [[ " $CHAINS " == *" nginx "* ]]; then
	n_after=$(col nginx 4 | median); n_per=$(col nginx 5 | median)
fi
table=$work/table.md
mib() { awk -v x="$1" 'BEGIN { printf "%.1f", x / 1024 }'; }
{
	if [ "$MODE" = slowheads ]; then
		echo "| proxy | RSS MiB before | RSS MiB holding $CONNS slow heads | × nginx | peak RSS MiB (VmHWM) | KiB per slow head | × nginx |"
		echo "|---|---:|---:|---:|---:|---:|---:|"
	else
		echo "| proxy | RSS MiB before | RSS MiB with $CONNS idle conns | × nginx | KiB per idle conn | × nginx |"
		echo "|---|---:|---:|---:|---:|---:|"
	fi
	for c in $CHAINS; do
		b=$(col "$c" 3 | median); a=$(col "$c" 4 | median); k=$(col "$c" 5 | median)
		ra=-; rk=-
		[ -n "$n_after" ] && ra=$(awk -v x="$a" -v y="$n_after" 'BEGIN { printf "%.2f", x / y }')
		[ -n "$n_per" ] && rk=$(awk -v x="$k" -v y="$n_per" 'BEGIN { printf "%.2f", x / y }')
		if [ "$MODE" = slowheads ]; then
			printf '| %s | %s | %s | %s | %s | %.2f | %s |\n' "$c" "$(mib "$b")" "$(mib "$a")" "$ra" "$(mib "$(col "$c" 6 | median)")" "$k" "$rk"
		else
			printf '| %s | %s | %s | %s | %.2f | %s |\n' "$c" "$(mib "$b")" "$(mib "$a")" "$ra" "$k" "$rk"
		fi
	done
} >"$table"
stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
loadavg="1-min load average during the runs: ${loads[*]}"
summary="$stamp, $(nproc) cores, $RUNS runs of $CONNS $what per proxy (medians), one hop, loopback; $loadavg"
echo "$summary"
cat "$table"
if [ "$README" != "-" ] && [ -f "$README" ] && grep -q "<!-- $marker:start -->" "$README"; then
	block=$work/block.md
	{
		echo "<!-- $marker:start -->"
		echo "Last run: $summary."
		echo
		cat "$table"
		echo "<!-- $marker:end -->"
	} >"$block"
	replace_block "$README" "$marker" "$block"
	log "table written to $README"
fi
