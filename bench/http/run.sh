#!/usr/bin/env bash
# bench/http/run.sh: HTTP/1.1 data-plane benchmark on loopback.
#
# Chains (every proxy: one worker / one thread / --concurrency 1, keep-alive
# to its upstream):
#   direct        wrk -> backend
#   nginx         wrk -> nginx -> nginx -> backend
#   haproxy       wrk -> haproxy -> haproxy -> backend
#   strait        wrk -> strait-proxy -> strait-proxy -> backend
#   strait-router same as strait, with the route straitd emits for a service
#                 (Istio's default retry policy, timeout 0s, attempt count);
#                 the policy never triggers: it measures the router's cost
#   strait-policy same as strait-router, plus the fault filter (abort and
#                 delay at 0 %) and the CORS filter with a policy (wrk sends
#                 no Origin): what a production route carries, not triggering
#   strait-<name> same with extra flags or another binary (see STRAIT_VARIANTS)
#   nginx-accesslog  nginx -> nginx, each writing an access log line per
#                 request (buffer=64k flush=1s, as Envoy's file logger)
#   strait-accesslog strait -> strait, each HCM with Istio's file access log
#                 (its default text format, to a file)
#   nginx-tls     nginx -> nginx with mutual TLS 1.3 on the middle hop
#                 (proxy_ssl client certificate, ssl_verify_client on)
#   strait-mtls   strait-proxy -> strait-proxy with mutual TLS 1.3 on the
#                 middle hop as two sidecars do (Istio's ALPN, URI SAN
#                 check, client certificate required; certificates from
#                 files here, where sidecars read them over SDS)
# The backend is nginx (1 worker) returning a fixed 1 KiB body, the same for
# every chain. Runs are interleaved (run 1 of every chain, then run 2, ...)
# so that load from other users of the machine hits all chains alike; each
# figure is the median over RUNS runs.
#
# Environment:
#   RUNS=5 DURATION=10s CONNS=16 THREADS=1 WARMUP=2s
#   CHAINS="direct nginx haproxy strait"   chains to run, in this order (also strait-router, strait-policy,
#                                          nginx-tls, strait-mtls, nginx-accesslog, strait-accesslog,
#                                          strait-telemetry, strait-base, strait-telemetry-base, strait-mtls-base)
#   STRAIT_BIN=path                        strait-proxy to use (default: built from this tree)
#   BASE_BIN=path                          the strait-proxy of the chains strait-base,
#                                          strait-telemetry-base and strait-mtls-base (another build, e.g. main's, in the same run)
#   STRAIT_VARIANTS="name=BIN[,flag,...] ..." extra strait chains, e.g.
#       STRAIT_VARIANTS="old=/tmp/strait-proxy.old"
#       (an empty BIN means STRAIT_BIN)
#   PORT_BASE=18100  the ports used start above it (another, beside another run of this script)
#   MEASURE='CMD'    runs CMD (through sh) beside each measured wrk run of a proxy chain, with
#                    {pids} (the chain's proxies, comma-separated), {name} and {run} replaced, e.g.
#                    MEASURE='perf stat -e raw_syscalls:sys_enter -p {pids} -o /tmp/{name}-{run}.txt -- sleep 8'
#   STRAIT_FLAGS="--cpu-profile /tmp/{name}.pprof"  extra flags of every strait-proxy ({name}: the
#                  proxy's name, e.g. strait-telemetry1 for hop 1; the profile is written when the script ends)
#   README=path    where to write the table (default bench/http/README.md; "-" = don't)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-5}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-16}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-2s}
CHAINS=${CHAINS:-"direct nginx haproxy strait"}
STRAIT_VARIANTS=${STRAIT_VARIANTS:-}
STRAIT_FLAGS=${STRAIT_FLAGS:-}
BASE_BIN=${BASE_BIN:-}
README=${README:-$here/README.md}
cmdline="$0 $*"
[ -n "${BENCH_CMD:-}" ] && cmdline=$BENCH_CMD

BENCH_NAME=bench
# shellcheck source=lib.sh
. "$here/lib.sh"

# --- dependencies -----------------------------------------------------------
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)

# --- process bookkeeping: everything we start is killed on exit ------------
bench_workdir strait-bench-http

build_strait_proxy

next_port=${PORT_BASE:-18100}

body=$(head -c 1024 /dev/zero | tr '\0' 'x')

nginx_access_log="access_log off;"
nginx_conf() { # name listen-port [upstream-port]
	local d="$work/$1"; mkdir -p "$d/logs"
	local loc
	if [ -n "${3:-}" ]; then
		loc="location / { proxy_pass http://next; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; }"
	else
		loc="location / { default_type text/plain; return 200 \"$body\"; }"
	fi
	cat >"$d/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/logs/error.log error;
events { worker_connections 4096; }
http {
	${nginx_access_log//LOGDIR/$d/logs}
	keepalive_requests 1000000;
	$( [ -n "${3:-}" ] && echo "upstream next { server 127.0.0.1:$3; keepalive 64; keepalive_requests 1000000; }" )
	server { listen 127.0.0.1:$2 reuseport; $loc }
}
EOF
	start "$1" "$NGINX" -p "$d" -c "$d/nginx.conf"
}

haproxy_conf() { # name listen-port upstream-port
	cat >"$work/$1.cfg" <<EOF
global
	nbthread 1
	maxconn 4096
defaults
	mode http
	option http-keep-alive
	timeout connect 5s
	timeout client 60s
	timeout server 60s
frontend fe
	bind 127.0.0.1:$2
	default_backend be
backend be
	http-reuse always
	server s1 127.0.0.1:$3
EOF
	start "$1" "$HAPROXY" -db -f "$work/$1.cfg"
}

# The route action and virtual host fields of the strait chains' routes
# (strait-router sets them).
route_extra=""
vhost_extra=""
entry_extra=""
router_filter='{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}'
http_filters="[$router_filter]"
istio_retry=", timeout: 0s, retry_policy: {retry_on: 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes', num_retries: 2, retriable_status_codes: [503], host_selection_retry_max_attempts: 5, retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts, typed_config: {'@type': type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate}}]}"

strait_conf() { # name listen-port upstream-port admin-port bin [flags...]
	local name=$1 lp=$2 up=$3 ap=$4 bin=$5; shift 5
	cat >"$work/$name.yaml" <<EOF
node: {id: bench, cluster: bench$node_extra}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $ap}}
static_resources:
  clusters:
  - name: next
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: next
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $up}}}}]}]
$cluster_extra
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: $lp}}
$listener_extra
    filter_chains:
    - $chain_extra
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
$hcm_extra
          route_config:
            virtual_hosts: [{name: all, domains: ["*"]$vhost_extra, routes: [{match: {prefix: /}$entry_extra, route: {cluster: next$route_extra}}]}]
          http_filters: $http_filters
EOF
	# shellcheck disable=SC2086 # STRAIT_FLAGS is a list of flags
	start "$name" "$bin" -c "$work/$name.yaml" --concurrency 1 --log-level error ${STRAIT_FLAGS//\{name\}/$name} "$@"
}

# Certificates for the TLS chains: a CA and two SPIFFE identities, as the
# mesh CA issues them (ECDSA P-256, URI SAN only).
nginx_tls_conf() { # name listen-port upstream-port tls-side(client|server)
	local d="$work/$1"; mkdir -p "$d/logs"
	local listen="listen 127.0.0.1:$2 reuseport;" loc
	if [ "$4" = server ]; then
		listen="listen 127.0.0.1:$2 ssl reuseport; ssl_protocols TLSv1.3; ssl_certificate $work/server.pem; ssl_certificate_key $work/server.key; ssl_client_certificate $work/ca.pem; ssl_verify_client on;"
		loc="location / { proxy_pass http://next; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; }"
	else
		loc="location / { proxy_pass https://next; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; proxy_ssl_protocols TLSv1.3; proxy_ssl_certificate $work/client.pem; proxy_ssl_certificate_key $work/client.key; proxy_ssl_trusted_certificate $work/ca.pem; proxy_ssl_verify off; proxy_ssl_session_reuse on; }"
	fi
	cat >"$d/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/logs/error.log error;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	upstream next { server 127.0.0.1:$3; keepalive 64; keepalive_requests 1000000; }
	server { $listen $loc }
}
EOF
	start "$1" "$NGINX" -p "$d" -c "$d/nginx.conf"
}

cluster_extra=""
chain_extra=""
hcm_extra=""
node_extra=""
listener_extra=""
# Istio's default access log format (pilot/pkg/model EnvoyTextLogFormat).
istio_log_format='[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% \"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n'
strait_access_log() { # file -> the HCM's access_log (YAML)
	printf '          access_log: [{name: envoy.access_loggers.file, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: %s, log_format: {text_format_source: {inline_string: "%s"}}}}]' "$1" "$istio_log_format"
}

# --- start everything -------------------------------------------------------
declare -A entry proxies
newport be_port
nginx_conf backend "$be_port"
be_pid=$started
wait_port "$be_port" "$be_pid"

chains=()
for c in $CHAINS; do
	case $c in
	direct)
		entry[direct]=$be_port; proxies[direct]=""; chains+=(direct) ;;
	nginx)
		newport p2; newport p1; newport a2; newport a1
		nginx_conf nginx2 "$p2" "$be_port"; a=$started; wait_port "$p2" "$a"
		nginx_conf nginx1 "$p1" "$p2"; b=$started; wait_port "$p1" "$b"
		entry[nginx]=$p1; proxies[nginx]="$b $a"; chains+=(nginx) ;;
	haproxy)
		newport p2; newport p1; newport a2; newport a1
		haproxy_conf haproxy2 "$p2" "$be_port"; a=$started; wait_port "$p2" "$a"
		haproxy_conf haproxy1 "$p1" "$p2"; b=$started; wait_port "$p1" "$b"
		entry[haproxy]=$p1; proxies[haproxy]="$b $a"; chains+=(haproxy) ;;
	strait|strait-base)
		bin=$STRAIT_BIN; [ "$c" = strait-base ] && bin=$BASE_BIN
		newport p2; newport p1; newport a2; newport a1
		strait_conf "${c}2" "$p2" "$be_port" "$a2" "$bin"; a=$started; wait_port "$p2" "$a"
		strait_conf "${c}1" "$p1" "$p2" "$a1" "$bin"; b=$started; wait_port "$p1" "$b"
		entry[$c]=$p1; proxies[$c]="$b $a"; chains+=("$c") ;;
	strait-router)
		newport p2; newport p1; newport a2; newport a1
		route_extra=$istio_retry
		vhost_extra=", include_request_attempt_count: true"
		strait_conf strait-router2 "$p2" "$be_port" "$a2" "$STRAIT_BIN"; a=$started; wait_port "$p2" "$a"
		strait_conf strait-router1 "$p1" "$p2" "$a1" "$STRAIT_BIN"; b=$started; wait_port "$p1" "$b"
		route_extra="" vhost_extra=""
		entry[strait-router]=$p1; proxies[strait-router]="$b $a"; chains+=(strait-router) ;;
	strait-policy)
		newport p2; newport p1; newport a2; newport a1
		route_extra=$istio_retry
		vhost_extra=", include_request_attempt_count: true"
		entry_extra=", typed_per_filter_config: {envoy.filters.http.fault: {'@type': type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault, abort: {http_status: 503, percentage: {numerator: 0}}, delay: {fixed_delay: 1s, percentage: {numerator: 0}}}, envoy.filters.http.cors: {'@type': type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy, allow_origin_string_match: [{exact: 'https://example.com'}], allow_methods: 'GET,POST', max_age: '3600'}}"
		http_filters="[{name: envoy.filters.http.fault, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}, {name: envoy.filters.http.cors, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, $router_filter]"
		strait_conf strait-policy2 "$p2" "$be_port" "$a2" "$STRAIT_BIN"; a=$started; wait_port "$p2" "$a"
		strait_conf strait-policy1 "$p1" "$p2" "$a1" "$STRAIT_BIN"; b=$started; wait_port "$p1" "$b"
		route_extra="" vhost_extra="" entry_extra="" http_filters="[$router_filter]"
		entry[strait-policy]=$p1; proxies[strait-policy]="$b $a"; chains+=(strait-policy) ;;
	nginx-accesslog)
		newport p2; newport p1
		nginx_access_log="log_format istio '[\$time_iso8601] \"\$request\" \$status - \$request_length \$bytes_sent \$request_time \"\$http_x_forwarded_for\" \"\$http_user_agent\" \"\$http_x_request_id\" \"\$host\" \"\$upstream_addr\" \$remote_addr:\$remote_port'; access_log LOGDIR/access.log istio buffer=64k flush=1s;"
		nginx_conf nginx-accesslog2 "$p2" "$be_port"; a=$started; wait_port "$p2" "$a"
		nginx_conf nginx-accesslog1 "$p1" "$p2"; b=$started; wait_port "$p1" "$b"
		nginx_access_log="access_log off;"
		entry[nginx-accesslog]=$p1; proxies[nginx-accesslog]="$b $a"; chains+=(nginx-accesslog) ;;
	strait-accesslog)
		newport p2; newport p1; newport a2; newport a1
		hcm_extra=$(strait_access_log "$work/strait-accesslog2.log")
		strait_conf strait-accesslog2 "$p2" "$be_port" "$a2" "$STRAIT_BIN"; a=$started; wait_port "$p2" "$a"
		hcm_extra=$(strait_access_log "$work/strait-accesslog1.log")
		strait_conf strait-accesslog1 "$p1" "$p2" "$a1" "$STRAIT_BIN"; b=$started; wait_port "$p1" "$b"
		hcm_extra=""
		entry[strait-accesslog]=$p1; proxies[strait-accesslog]="$b $a"; chains+=(strait-accesslog) ;;
	strait-telemetry|strait-telemetry-base)
		bin=$STRAIT_BIN; [ "$c" = strait-telemetry-base ] && bin=$BASE_BIN
		# Istio's telemetry as straitd writes it for sidecars: the
		# metadata exchange and istio.stats before the router, hop 1 the
		# client's outbound side, hop 2 the server's inbound side, each
		# with its workload in the node metadata.
		newport p2; newport p1; newport a2; newport a1
		mx='{name: istio.metadata_exchange, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/io.istio.http.peer_metadata.Config, value: {SIDE_discovery: [{istio_headers: {}}, {workload_discovery: {}}], SIDE_propagation: [{istio_headers: {}}]}}}'
		node_extra=", metadata: {NAME: server-1, NAMESPACE: bench, WORKLOAD_NAME: server, LABELS: {app: server, version: v1}}"
		listener_extra="    traffic_direction: INBOUND"
		http_filters="[${mx//SIDE/downstream}, {name: istio.stats, typed_config: {'@type': type.googleapis.com/stats.PluginConfig, disable_host_header_fallback: true}}, $router_filter]"
		strait_conf "${c}2" "$p2" "$be_port" "$a2" "$bin"; a=$started; wait_port "$p2" "$a"
		node_extra=", metadata: {NAME: client-1, NAMESPACE: bench, WORKLOAD_NAME: client, LABELS: {app: client, version: v1}}"
		listener_extra="    traffic_direction: OUTBOUND"
		http_filters="[${mx//SIDE/upstream}, {name: istio.stats, typed_config: {'@type': type.googleapis.com/stats.PluginConfig}}, $router_filter]"
		strait_conf "${c}1" "$p1" "$p2" "$a1" "$bin"; b=$started; wait_port "$p1" "$b"
		node_extra="" listener_extra="" http_filters="[$router_filter]"
		entry[$c]=$p1; proxies[$c]="$b $a"; chains+=("$c") ;;
	nginx-tls)
		mkcerts
		newport p2; newport p1
		nginx_tls_conf nginx-tls2 "$p2" "$be_port" server; a=$started; wait_port "$p2" "$a"
		nginx_tls_conf nginx-tls1 "$p1" "$p2" client; b=$started; wait_port "$p1" "$b"
		entry[nginx-tls]=$p1; proxies[nginx-tls]="$b $a"; chains+=(nginx-tls) ;;
	strait-mtls|strait-mtls-base)
		mkcerts
		bin=$STRAIT_BIN
		[ "$c" = strait-mtls-base ] && bin=${BASE_BIN:?strait-mtls-base needs BASE_BIN}
		newport p2; newport p1; newport a2; newport a1
		chain_extra="transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, require_client_certificate: true, common_tls_context: $(tls_common server client h2 http/1.1)}}"
		strait_conf "${c}2" "$p2" "$be_port" "$a2" "$bin"; a=$started; wait_port "$p2" "$a"
		chain_extra=""
		cluster_extra="    transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: server, common_tls_context: $(tls_common client server istio-peer-exchange istio)}}"
		strait_conf "${c}1" "$p1" "$p2" "$a1" "$bin"; b=$started; wait_port "$p1" "$b"
		cluster_extra=""
		entry[$c]=$p1; proxies[$c]="$b $a"; chains+=("$c") ;;
	*) log "unknown chain $c"; exit 2 ;;
	esac
done
for v in $STRAIT_VARIANTS; do
	name=strait-${v%%=*}
	IFS=, read -r -a spec <<<"${v#*=}"
	bin=${spec[0]:-$STRAIT_BIN}
	flags=("${spec[@]:1}")
	newport p2; newport p1; newport a2; newport a1
	strait_conf "$name-2" "$p2" "$be_port" "$a2" "$bin" ${flags[@]+"${flags[@]}"}; a=$started; wait_port "$p2" "$a"
	strait_conf "$name-1" "$p1" "$p2" "$a1" "$bin" ${flags[@]+"${flags[@]}"}; b=$started; wait_port "$p1" "$b"
	entry[$name]=$p1; proxies[$name]="$b $a"; chains+=("$name")
done

# Sanity: every chain returns the 1 KiB body.
for c in "${chains[@]}"; do
	n=$(curl -sf "http://127.0.0.1:${entry[$c]}/" | wc -c) || n=0
	if [ "$n" != 1024 ]; then log "chain $c returned $n bytes, want 1024"; exit 1; fi
done

hz=$(getconf CLK_TCK)
results=$work/results.tsv # chain run rps p50 p99 cpu1 cpu2 (cpu: s per 1000 requests)
: >"$results"
log "chains: ${chains[*]}; $RUNS runs of wrk -t$THREADS -c$CONNS -d$DURATION each, interleaved"
for c in "${chains[@]}"; do
	run_wrk "$work/warmup.txt" -t"$THREADS" -c"$CONNS" -d"$WARMUP" "http://127.0.0.1:${entry[$c]}/"
done
for run in $(seq "$RUNS"); do
	for c in "${chains[@]}"; do
		read -r -a pp <<<"${proxies[$c]}"
		before=(); for p in "${pp[@]}"; do before+=("$(cpu_ticks "$p")"); done
		measure=
		if [ -n "${MEASURE:-}" ] && [ ${#pp[@]} -gt 0 ]; then
			m=${MEASURE//\{pids\}/$(IFS=,; echo "${pp[*]}")}; m=${m//\{name\}/$c}; m=${m//\{run\}/$run}
			sh -c "$m" >"$work/measure.log" 2>&1 &
			measure=$!
		fi
		run_wrk "$work/wrk.txt" -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:${entry[$c]}/"
		if [ -n "$measure" ]; then wait "$measure" || log "$c: MEASURE failed: $(tail -n 3 "$work/measure.log")"; fi
		out=$(cat "$work/wrk.txt")
		after=(); for p in "${pp[@]}"; do after+=("$(cpu_ticks "$p")"); done
		rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
		reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
		errs=$(awk '/Non-2xx|Socket errors/ { print }' <<<"$out")
		[ -n "$errs" ] && log "$c: $errs"
		p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
		p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
		cpus=()
		for i in "${!pp[@]}"; do
			cpus+=("$(awk -v d=$((after[i] - before[i])) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.4f", d / hz / (n / 1000) }')")
		done
		[ ${#cpus[@]} -eq 0 ] && cpus=(- -)
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$rps" "$p50" "$p99" "${cpus[0]}" "${cpus[1]}" >>"$results"
		log "run $run $c: $rps rps, p50 ${p50}ms p99 ${p99}ms, cpu/1k req ${cpus[*]}"
	done
done

col() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$results"; }

nginx_rps=""; nginx_core=""
if [[ " ${chains[*]} " == *" nginx "* ]]; then
	nginx_rps=$(col nginx 3 | median)
	nginx_core=$(awk -v a="$(col nginx 6 | median)" -v b="$(col nginx 7 | median)" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
fi
table=$work/table.md
{
	echo "| chain | rps (median) | × nginx | p50 ms | p99 ms | CPU s / 1000 req (hop 1, hop 2) | req/s per core per proxy | × nginx | peak RSS MiB (hop 1, hop 2) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for c in "${chains[@]}"; do
		rps=$(col "$c" 3 | median)
		ratio=-
		[ -n "$nginx_rps" ] && ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.2f", a / b }')
		read -r -a pp <<<"${proxies[$c]}"
		cpu="-"; rss="-"; core="-"; core_ratio="-"
		if [ ${#pp[@]} -eq 2 ]; then
			c1=$(col "$c" 6 | median); c2=$(col "$c" 7 | median)
			cpu="$c1, $c2"
			rss="$(hwm "${pp[0]}"), $(hwm "${pp[1]}")"
			core=$(awk -v a="$c1" -v b="$c2" 'BEGIN { printf "%.0f", 2000 / (a + b) }')
			[ -n "$nginx_core" ] && core_ratio=$(awk -v a="$core" -v b="$nginx_core" 'BEGIN { printf "%.2f", a / b }')
		fi
		printf '| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "$rps" "$ratio" "$(col "$c" 4 | median)" "$(col "$c" 5 | median)" "$cpu" "$core" "$core_ratio" "$rss"
	done
} >"$table"

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
echo
echo "$stamp, $(nproc) cores, $RUNS runs of wrk -t$THREADS -c$CONNS -d$DURATION, 1 KiB body, loopback"
echo "command: $cmdline"
cat "$table"

if [ "$README" != "-" ] && [ -f "$README" ]; then
	block=$work/block.md
	{
		echo "<!-- results:start -->"
		echo "Last run: $stamp, $(nproc) cores, $RUNS runs of \`wrk -t$THREADS -c$CONNS -d$DURATION\` per chain (medians), 1 KiB body, loopback."
		echo "Command: \`$cmdline\`"
		echo
		cat "$table"
		echo "<!-- results:end -->"
	} >"$block"
	replace_block "$README" results "$block"
	log "table written to $README"
fi
