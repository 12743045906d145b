#!/usr/bin/env bash
# bench/http/gateway.sh: an ingress gateway's HTTP/1.1 data plane with TLS
# termination, in front of ROUTES routes and BACKENDS backends, on loopback.
#
#   nginx   wrk -https-> nginx -> backends   (ROUTES locations, each
#           proxy_pass to an upstream of BACKENDS/ROUTES servers, least_conn,
#           keepalive)
#   strait  wrk -https-> strait-proxy -> backends   (the shape straitd emits
#           for a Gateway's HTTPS server bound by a VirtualService with
#           ROUTES prefix routes: one virtual host, a route per prefix with
#           Istio's default retry policy and timeout 0s, a cluster per route
#           with its endpoints and LEAST_REQUEST, TLS 1.3 with ALPN h2 and
#           http/1.1; certificates from files where a gateway reads them
#           over SDS)
# One worker each (--concurrency 1). The backends are one nginx (1 worker)
# listening on BACKENDS ports with a fixed 1 KiB body; wrk cycles through
# the routes (one request per route in turn) over CONNS keep-alive TLS
# connections. Runs are interleaved; figures are medians over RUNS.
#
# Environment: RUNS=3 DURATION=10s CONNS=16 ROUTES=100 BACKENDS=1000
# STRAIT_BIN=path STRAIT_FLAGS="--cpu-profile /tmp/gw-{name}.pprof" (extra flags
# of the strait gateways; {name}: strait, strait-telemetry or strait-NAME)
# STRAIT_VARIANTS="name=BIN[,flag,...] ..." adds a strait-NAME gateway per
# variant, the strait configuration on another binary or with extra flags
# (an empty BIN means STRAIT_BIN), e.g. STRAIT_VARIANTS="old=/tmp/strait-proxy.old"
# PORT_BASE=18500 (the ports used start above it; the backends' at PORT_BASE+1500)
# README=path (default bench/http/README.md; "-" = don't)
# MEASURE='CMD' runs CMD (through sh) beside each measured wrk run, with
# {pid}, {name} and {run} replaced by the gateway's PID, its chain's name and
# the run's number, e.g. MEASURE='perf stat -e context-switches -p {pid} -o
# /tmp/gw-{name}-{run}.txt -- sleep 8' (the run waits for it to end)
# TELEMETRY=1 adds strait-telemetry: the same gateway with what straitd
# writes for a gateway's telemetry in front of the router (Istio's
# istio.metadata_exchange, upstream side, and istio.stats on an OUTBOUND
# listener: the source reporter; the backends send no exchange back).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-16}
ROUTES=${ROUTES:-100}
STRAIT_FLAGS=${STRAIT_FLAGS:-}
BACKENDS=${BACKENDS:-1000}
README=${README:-$here/README.md}
TELEMETRY=${TELEMETRY:-}
STRAIT_VARIANTS=${STRAIT_VARIANTS:-}
PORT_BASE=${PORT_BASE:-18500}
BENCH_NAME=bench-gateway
# shellcheck source=lib.sh
. "$here/lib.sh"

if [ $((BACKENDS % ROUTES)) -ne 0 ]; then
	log "BACKENDS ($BACKENDS) must be a multiple of ROUTES ($ROUTES)"; exit 2
fi
per=$((BACKENDS / ROUTES))
bench_need wrk:wrk nginx-light:nginx openssl:openssl curl:curl
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
bench_workdir strait-bench-gateway
build_strait_proxy

be_base=$((PORT_BASE + 1500)) # backends listen on be_base .. be_base+BACKENDS-1
nginx_port=$((PORT_BASE + 1)) strait_port=$((PORT_BASE + 2)) admin_port=$((PORT_BASE + 3))
telemetry_port=$((PORT_BASE + 4)) telemetry_admin_port=$((PORT_BASE + 5))
next_port=$((PORT_BASE + 10)) # variants' ports
body=$(head -c 1024 /dev/zero | tr '\0' 'x')

# --- certificates: a CA and the gateway's server certificate ----------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /O=bench \
	-keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=gateway.bench \
	-keyout "$work/gw.key" -out "$work/gw.csr" 2>/dev/null
printf 'subjectAltName=DNS:gateway.bench\nextendedKeyUsage=serverAuth\n' >"$work/gw.ext"
openssl x509 -req -in "$work/gw.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 1 \
	-extfile "$work/gw.ext" -out "$work/gw.pem" 2>/dev/null

# --- backends -------------------------------------------------------------------
d=$work/backend; mkdir -p "$d/logs"
{
	echo "daemon off; master_process off; worker_processes 1; pid $d/nginx.pid;"
	echo "error_log $d/logs/error.log error; worker_rlimit_nofile 65536;"
	echo "events { worker_connections 16384; }"
	echo "http { access_log off; keepalive_requests 1000000; server {"
	for i in $(seq 0 $((BACKENDS - 1))); do echo "listen 127.0.0.1:$((be_base + i));"; done
	echo "location / { default_type text/plain; return 200 \"$body\"; } } }"
} >"$d/nginx.conf"
start backend "$NGINX" -p "$d" -c "$d/nginx.conf"
wait_port $((be_base + BACKENDS - 1)) "$started"

# --- nginx as the gateway ---------------------------------------------------------
d=$work/nginx; mkdir -p "$d/logs"
{
	echo "daemon off; master_process off; worker_processes 1; pid $d/nginx.pid;"
	echo "error_log $d/logs/error.log error; worker_rlimit_nofile 65536;"
	echo "events { worker_connections 16384; }"
	echo "http { access_log off; keepalive_requests 1000000;"
	for r in $(seq 0 $((ROUTES - 1))); do
		echo "upstream u$r { least_conn; keepalive 16; keepalive_requests 1000000;"
		for j in $(seq 0 $((per - 1))); do echo "server 127.0.0.1:$((be_base + r * per + j));"; done
		echo "}"
	done
	echo "server { listen 127.0.0.1:$nginx_port ssl reuseport; ssl_protocols TLSv1.2 TLSv1.3;"
	echo "ssl_certificate $work/gw.pem; ssl_certificate_key $work/gw.key;"
	for r in $(seq 0 $((ROUTES - 1))); do
		echo "location /r$r/ { proxy_pass http://u$r; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; }"
	done
	echo "} }"
} >"$d/nginx.conf"
start nginx "$NGINX" -p "$d" -c "$d/nginx.conf"
nginx_pid=$started
wait_port "$nginx_port" "$nginx_pid"

# --- strait-proxy as the gateway --------------------------------------------------
retry="retry_policy: {retry_on: 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes', num_retries: 2, retriable_status_codes: [503], host_selection_retry_max_attempts: 5, retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts, typed_config: {'@type': type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate}}]}"
{
	cat <<EOF
node: {id: "router~127.0.0.1~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local", cluster: istio-ingressgateway.istio-system}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $admin_port}}
static_resources:
  clusters:
EOF
	for r in $(seq 0 $((ROUTES - 1))); do
		echo "  - name: outbound|80||svc$r.bench.svc.cluster.local"
		echo "    type: STATIC"
		echo "    connect_timeout: 10s"
		echo "    lb_policy: LEAST_REQUEST"
		echo "    load_assignment:"
		echo "      cluster_name: outbound|80||svc$r.bench.svc.cluster.local"
		echo "      endpoints: [{lb_endpoints: ["
		for j in $(seq 0 $((per - 1))); do
			echo "        {endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $((be_base + r * per + j))}}}},"
		done
		echo "      ]}]"
	done
	cat <<EOF
  listeners:
  - name: 0.0.0.0_443
    address: {socket_address: {address: 127.0.0.1, port_value: $strait_port}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params: {tls_minimum_protocol_version: TLSv1_2, tls_maximum_protocol_version: TLSv1_3}
            alpn_protocols: [h2, http/1.1]
            tls_certificates: [{certificate_chain: {filename: $work/gw.pem}, private_key: {filename: $work/gw.key}}]
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: outbound_0.0.0.0_443
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
          route_config:
            name: https.443.https.gateway.istio-system
            virtual_hosts:
            - name: gateway.bench:443
              domains: ["*"]
              include_request_attempt_count: true
              routes:
EOF
	for r in $(seq 0 $((ROUTES - 1))); do
		echo "              - {match: {prefix: /r$r/}, route: {cluster: 'outbound|80||svc$r.bench.svc.cluster.local', timeout: 0s, $retry}}"
	done
} >"$work/strait.yaml"
# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
start strait "$STRAIT_BIN" -c "$work/strait.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/strait}
strait_pid=$started
wait_port "$strait_port" "$strait_pid"

declare -A entry=([nginx]=$nginx_port [strait]=$strait_port) proxy=([nginx]=$nginx_pid [strait]=$strait_pid)
chains=(nginx strait)

if [ -n "$TELEMETRY" ]; then
	mx='{name: istio.metadata_exchange, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/io.istio.http.peer_metadata.Config, value: {upstream_discovery: [{istio_headers: {}}, {workload_discovery: {}}], upstream_propagation: [{istio_headers: {}}]}}}'
	sed -e "s|cluster: istio-ingressgateway.istio-system}|cluster: istio-ingressgateway.istio-system, metadata: {NAME: istio-ingressgateway-1, NAMESPACE: istio-system, WORKLOAD_NAME: istio-ingressgateway, LABELS: {app: istio-ingressgateway, istio: ingressgateway}}}|" \
		-e "s|port_value: $admin_port}|port_value: $telemetry_admin_port}|" \
		-e "s|^\(    address: {socket_address: {address: 127.0.0.1, port_value: \)$strait_port}}|\1$telemetry_port}}\n    traffic_direction: OUTBOUND|" \
		-e "s|^          http_filters: \[|          http_filters: [$mx, {name: istio.stats, typed_config: {'@type': type.googleapis.com/stats.PluginConfig}}, |" \
		"$work/strait.yaml" >"$work/strait-telemetry.yaml"
	# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
	start strait-telemetry "$STRAIT_BIN" -c "$work/strait-telemetry.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/strait-telemetry}
	wait_port "$telemetry_port" "$started"
	entry[strait-telemetry]=$telemetry_port proxy[strait-telemetry]=$started
	chains+=(strait-telemetry)
fi

for v in $STRAIT_VARIANTS; do
	name=strait-${v%%=*}
	IFS=, read -r -a spec <<<"${v#*=}"
	bin=${spec[0]:-$STRAIT_BIN}
	flags=("${spec[@]:1}")
	newport vport; newport vadmin
	sed -e "s|port_value: $admin_port}|port_value: $vadmin}|" -e "s|port_value: $strait_port}|port_value: $vport}|" \
		"$work/strait.yaml" >"$work/$name.yaml"
	# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
	start "$name" "$bin" -c "$work/$name.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/$name} ${flags[@]+"${flags[@]}"}
	wait_port "$vport" "$started"
	entry[$name]=$vport proxy[$name]=$started
	chains+=("$name")
done

# Sanity: every route of every chain answers the body, over TLS verified
# against the CA.
for c in "${chains[@]}"; do
	for r in 0 $((ROUTES / 2)) $((ROUTES - 1)); do
		n=$(curl -sf --cacert "$work/ca.pem" --resolve "gateway.bench:${entry[$c]}:127.0.0.1" \
			"https://gateway.bench:${entry[$c]}/r$r/x" | wc -c) || n=0
		if [ "$n" != 1024 ]; then
			log "chain $c route /r$r/ returned $n bytes, want 1024:"
			curl -sS -o /dev/null --cacert "$work/ca.pem" --resolve "gateway.bench:${entry[$c]}:127.0.0.1" \
				"https://gateway.bench:${entry[$c]}/r$r/x" >&2 || true
			tail -n 5 "$work"/*.log "$work"/*/logs/error.log >&2 2>/dev/null || true
			exit 1
		fi
	done
done

cat >"$work/routes.lua" <<EOF
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/r" .. (i % $ROUTES) .. "/")
end
EOF

hz=$(getconf CLK_TCK)
results=$work/results.tsv # chain run rps p50 p99 cpu user-cpu (s per 1000 requests) context-switches-per-request
: >"$results"
log "chains: ${chains[*]}; $ROUTES routes, $BACKENDS backends; $RUNS runs of wrk -t1 -c$CONNS -d$DURATION each, interleaved"
for c in "${chains[@]}"; do
	run_wrk "$work/warmup.txt" -t1 -c"$CONNS" -d2s -s "$work/routes.lua" "https://127.0.0.1:${entry[$c]}"
done
for run in $(seq "$RUNS"); do
	for c in "${chains[@]}"; do
		before=$(cpu_ticks "${proxy[$c]}") ubefore=$(user_ticks "${proxy[$c]}") csbefore=$(ctx_switches "${proxy[$c]}")
		measure=
		if [ -n "${MEASURE:-}" ]; then
			m=${MEASURE//\{pid\}/${proxy[$c]}}; m=${m//\{name\}/$c}; m=${m//\{run\}/$run}
			sh -c "$m" >"$work/measure.log" 2>&1 &
			measure=$!
		fi
		run_wrk "$work/wrk.txt" -t1 -c"$CONNS" -d"$DURATION" --latency -s "$work/routes.lua" "https://127.0.0.1:${entry[$c]}"
		if [ -n "$measure" ]; then wait "$measure" || log "$c: MEASURE failed: $(tail -n 3 "$work/measure.log")"; fi
		after=$(cpu_ticks "${proxy[$c]}") uafter=$(user_ticks "${proxy[$c]}") csafter=$(ctx_switches "${proxy[$c]}")
		out=$(cat "$work/wrk.txt")
		if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
			log "$c: errors in run $run:"; grep -E 'Non-2xx|Socket errors' <<<"$out" >&2; exit 1
		fi
		rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
		reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
		p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
		p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
		cpu=$(awk -v d=$((after - before)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.4f", d / hz / (n / 1000) }')
		ucpu=$(awk -v d=$((uafter - ubefore)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.4f", d / hz / (n / 1000) }')
		cs=$(awk -v d=$((csafter - csbefore)) -v n="$reqs" 'BEGIN { printf "%.2f", d / n }')
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$rps" "$p50" "$p99" "$cpu" "$ucpu" "$cs" >>"$results"
		log "run $run $c: $rps rps, p50 ${p50}ms p99 ${p99}ms, cpu/1k req $cpu (user $ucpu), switches/req $cs"
	done
done

col() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$results"; }
nginx_rps=$(col nginx 3 | median)
nginx_core=$(awk -v a="$(col nginx 6 | median)" 'BEGIN { printf "%.0f", 1000 / a }')
table=$work/table.md
{
	echo "| gateway | rps (median) | × nginx | p50 ms | p99 ms | CPU s / 1000 req | user | switches / req | req/s per core | × nginx | peak RSS MiB |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for c in "${chains[@]}"; do
		rps=$(col "$c" 3 | median)
		cpu=$(col "$c" 6 | median)
		core=$(awk -v a="$cpu" 'BEGIN { printf "%.0f", 1000 / a }')
		printf '| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "$rps" \
			"$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.2f", a / b }')" \
			"$(col "$c" 4 | median)" "$(col "$c" 5 | median)" "$cpu" "$(col "$c" 7 | median)" "$(col "$c" 8 | median)" "$core" \
			"$(awk -v a="$core" -v b="$nginx_core" 'BEGIN { printf "%.2f", a / b }')" "$(hwm "${proxy[$c]}")"
	done
} >"$table"

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "$stamp, $(nproc) cores, $ROUTES routes, $BACKENDS backends, $RUNS runs of wrk -t1 -c$CONNS -d$DURATION over TLS, load average $load"
cat "$table"

if [ "$README" != "-" ] && [ -f "$README" ]; then
	{
		echo "<!-- gatewayresults:start -->"
		echo "Last run: $stamp, $(nproc) cores, $ROUTES routes over $BACKENDS backends, $RUNS runs of \`wrk -t1 -c$CONNS -d$DURATION\` over TLS per gateway (medians), 1 KiB body, loopback; load average after the runs: $load."
		echo
		cat "$table"
		echo "<!-- gatewayresults:end -->"
	} >"$work/block.md"
	replace_block "$README" gatewayresults "$work/block.md"
	log "table written to $README"
fi
